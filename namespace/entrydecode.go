package namespace

// The hand-written reader of the raft log format: decodeEntryFast and the
// forms it takes and declines are described in entrycodec.go, whose writer
// makes the same bytes.

import (
	"math"

	"github.com/latch-io/latch/namespace/msgp"
)

// decodeEntryFast decodes b, or declines (false) for DecodeEntry to run
// the reflection decoder: it succeeds only where that decoder gives the
// same entry.
func decodeEntryFast(b []byte) (*Entry, bool) {
	r := entryReader{msgp.NewReader(b)}
	e := new(Entry)
	n := r.MapLen()
	var seen uint8
	for i := 0; i < n && r.OK(); i++ {
		switch string(r.Key()) {
		case "c":
			r.once(&seen, 1)
			r.command(&e.Cmd, false)
		case "t":
			r.once(&seen, 2)
			e.Time = r.Int(64)
		default:
			r.Fail()
		}
	}
	if !r.Done() {
		return nil, false
	}
	return e, true
}

// entryReader reads an entry's structure with msgp.Reader's primitives:
// a read that meets anything they do not take fails the reader, every
// later read is then a no-op, and the caller checks once.
type entryReader struct {
	msgp.Reader
}

// once marks a field seen and refuses a second one: go-msgpack would
// decode a repeated field over the first (merging into a slice's
// elements), which the fast path does not copy.
func (r *entryReader) once(seen *uint8, bit uint8) {
	if *seen&bit != 0 {
		r.Fail()
	}
	*seen |= bit
}

func (r *entryReader) onceCmd(seen *uint32, bit uint) {
	if *seen&(1<<bit) != 0 {
		r.Fail()
	}
	*seen |= 1 << bit
}

// command decodes a map into c. Inside a multi or a txn (nested) an "ops"
// or "txn_else" field is declined: the fast path keeps its nesting well
// inside MaxDepth.
func (r *entryReader) command(c *Command, nested bool) {
	n := r.MapLen()
	var seen uint32
	for i := 0; i < n && r.OK(); i++ {
		switch string(r.Key()) {
		case "o":
			r.onceCmd(&seen, 0)
			c.Op = Op(r.Uint(math.MaxUint8))
		case "p":
			r.onceCmd(&seen, 1)
			c.Path = r.Str()
		case "d":
			r.onceCmd(&seen, 2)
			c.Data = r.Bin()
		case "f":
			r.onceCmd(&seen, 3)
			c.Flags = CreateFlags(r.Uint(math.MaxUint8))
		case "v":
			r.onceCmd(&seen, 4)
			c.Version = r.Int(64)
		case "s":
			r.onceCmd(&seen, 5)
			c.Session = r.Uint(math.MaxUint64)
		case "ss":
			r.onceCmd(&seen, 6)
			c.Sessions = r.uints()
		case "sec":
			r.onceCmd(&seen, 7)
			c.Secret = r.Bin()
		case "ttl":
			r.onceCmd(&seen, 8)
			c.TTLMillis = r.Int(64)
		case "id":
			r.onceCmd(&seen, 9)
			c.Identity = r.Str()
		case "acl_h":
			r.onceCmd(&seen, 10)
			c.Host = r.Str()
		case "ops":
			r.onceCmd(&seen, 11)
			if nested {
				r.Fail()
				break
			}
			c.Ops = r.commands()
		case "m":
			r.onceCmd(&seen, 12)
			c.Member = r.member()
		case "lm":
			r.onceCmd(&seen, 13)
			c.Mode = LockMode(r.Uint(math.MaxUint8))
		case "lh":
			r.onceCmd(&seen, 14)
			c.HoldTTLMillis = r.Int(64)
		case "ld":
			r.onceCmd(&seen, 15)
			c.LockDelayMillis = r.Int(64)
		case "lk_try":
			r.onceCmd(&seen, 16)
			c.Try = r.Bool()
		case "lk_rid":
			r.onceCmd(&seen, 17)
			c.RequestID = r.Str()
		case "acl_d":
			r.onceCmd(&seen, 18)
			c.ACLDefault = Perm(r.Uint(math.MaxUint8))
		case "ops_wd":
			r.onceCmd(&seen, 19)
			c.Withdrawn = r.Bool()
		case "txn_else":
			r.onceCmd(&seen, 20)
			if nested {
				r.Fail()
				break
			}
			c.Else = r.commands()
		case "txn_if":
			r.onceCmd(&seen, 21)
			c.Compares = r.compares()
		default: // "acl", "st_lim" (rare: the reflection decoder's), or unknown
			r.Fail()
		}
	}
}

func (r *entryReader) commands() []Command {
	n := r.ArrayLen()
	if !r.OK() {
		return nil
	}
	cs := make([]Command, n)
	for i := range cs {
		r.command(&cs[i], true)
		if !r.OK() {
			return nil
		}
	}
	return cs
}

func (r *entryReader) compares() []Compare {
	n := r.ArrayLen()
	if !r.OK() {
		return nil
	}
	cs := make([]Compare, n)
	for i := range cs {
		r.compare(&cs[i])
		if !r.OK() {
			return nil
		}
	}
	return cs
}

func (r *entryReader) compare(c *Compare) {
	n := r.MapLen()
	var seen uint8
	for i := 0; i < n && r.OK(); i++ {
		switch string(r.Key()) {
		case "p":
			r.once(&seen, 1)
			c.Path = r.Str()
		case "t":
			r.once(&seen, 2)
			c.Target = CmpTarget(r.Uint(math.MaxUint8))
		case "c":
			r.once(&seen, 4)
			c.Op = CmpOp(r.Uint(math.MaxUint8))
		case "v":
			r.once(&seen, 8)
			c.Value = r.Bin()
		case "n":
			r.once(&seen, 16)
			c.Number = r.Int(64)
		default:
			r.Fail()
		}
	}
}

func (r *entryReader) member() *Member {
	n := r.MapLen()
	m := new(Member)
	var seen uint8
	for i := 0; i < n && r.OK(); i++ {
		switch string(r.Key()) {
		case "id":
			r.once(&seen, 1)
			m.ID = r.Str()
		case "r":
			r.once(&seen, 2)
			m.RaftAddr = r.Str()
		case "c":
			r.once(&seen, 4)
			m.ClientAddr = r.Str()
		case "h":
			r.once(&seen, 8)
			m.HTTPAddr = r.Str()
		case "api_addr":
			r.once(&seen, 16)
			m.APIAddr = r.Str()
		default:
			r.Fail()
		}
	}
	return m
}

func (r *entryReader) uints() []uint64 {
	n := r.ArrayLen()
	if !r.OK() {
		return nil
	}
	s := make([]uint64, n)
	for i := range s {
		s[i] = r.Uint(math.MaxUint64)
	}
	return s
}
