package namespace

import (
	"encoding/binary"
	"math"

	"github.com/latch-io/latch/session/msgp"
)

// The raft log format is what go-msgpack's reflection codec, configured as
// entryHandle, makes of Entry. Reflection costs on the hot path: on the
// leader every proposal runs the encoder on a fresh goroutine whose stack
// its recursion grows (runtime.newstack/copystack), and every member runs
// the decoder on every applied entry. This file writes and reads the same
// bytes by hand:
//
//   - mpEntry writes exactly the bytes entryHandle's encoder writes
//     (FuzzEntryCodec compares them): a struct is a map of its non-omitted
//     fields in the order of their sorted tags, integers in the smallest
//     form msgpack-c picks (signed types as int8..int64 beyond fixint,
//     unsigned as uint8..uint64), strings as str (str8 allowed: WriteExt),
//     []byte as bin; internal/msgp writes these forms.
//   - decodeEntryFast reads the forms the encoder writes and the others
//     go-msgpack reads the same way (any map/array header width, str or
//     bin for a string or []byte, any integer width), and declines anything
//     else: nil, a struct as an array, a repeated field, a multi inside a
//     multi, ACL rules, limits, an unknown field, an integer that does not
//     fit, bytes left over. DecodeEntry then runs the reflection decoder,
//     so every entry decodes, and fails, exactly as before. (entryReader
//     takes more forms than msgp.Reader, which takes only what the encoder
//     writes; both are exact, the wider one just declines less.)

// mpEntry appends e's log encoding to b.
func mpEntry(b []byte, e *Entry) []byte {
	b = append(b, 0x82)
	b = msgp.AppendKey(b, "c")
	b = mpCommand(b, &e.Cmd)
	b = msgp.AppendKey(b, "t")
	return msgp.AppendInt(b, e.Time)
}

// mpEntrySize is len(mpEntry(nil, e)).
func mpEntrySize(e *Entry) int {
	return 1 + 2 + mpCommandSize(&e.Cmd) + 2 + msgp.IntSize(e.Time)
}

// mpCommand writes c's fields in the order of their sorted tags (the
// order go-msgpack writes a struct as a map), omitting the empty omitempty
// ones; o and v are always written.
func mpCommand(b []byte, c *Command) []byte {
	b = msgp.AppendMapLen(b, mpCommandFields(c))
	if len(c.ACL) > 0 {
		b = msgp.AppendKey(b, "acl")
		b = msgp.AppendArrayLen(b, len(c.ACL))
		for i := range c.ACL {
			b = mpACLRule(b, &c.ACL[i])
		}
	}
	if c.ACLDefault != 0 {
		b = msgp.AppendKey(b, "acl_d")
		b = msgp.AppendUint(b, uint64(c.ACLDefault))
	}
	if c.Host != "" {
		b = msgp.AppendKey(b, "acl_h")
		b = msgp.AppendStr(b, c.Host)
	}
	if len(c.Data) > 0 {
		b = msgp.AppendKey(b, "d")
		b = msgp.AppendBin(b, c.Data)
	}
	if c.Flags != 0 {
		b = msgp.AppendKey(b, "f")
		b = msgp.AppendUint(b, uint64(c.Flags))
	}
	if c.Identity != "" {
		b = msgp.AppendKey(b, "id")
		b = msgp.AppendStr(b, c.Identity)
	}
	if c.LockDelayMillis != 0 {
		b = msgp.AppendKey(b, "ld")
		b = msgp.AppendInt(b, c.LockDelayMillis)
	}
	if c.HoldTTLMillis != 0 {
		b = msgp.AppendKey(b, "lh")
		b = msgp.AppendInt(b, c.HoldTTLMillis)
	}
	if c.RequestID != "" {
		b = msgp.AppendKey(b, "lk_rid")
		b = msgp.AppendStr(b, c.RequestID)
	}
	if c.Try {
		b = msgp.AppendKey(b, "lk_try")
		b = append(b, 0xc3)
	}
	if c.Mode != 0 {
		b = msgp.AppendKey(b, "lm")
		b = msgp.AppendUint(b, uint64(c.Mode))
	}
	if c.Member != nil {
		b = msgp.AppendKey(b, "m")
		b = mpMember(b, c.Member)
	}
	b = msgp.AppendKey(b, "o")
	b = msgp.AppendUint(b, uint64(c.Op))
	if len(c.Ops) > 0 {
		b = msgp.AppendKey(b, "ops")
		b = msgp.AppendArrayLen(b, len(c.Ops))
		for i := range c.Ops {
			b = mpCommand(b, &c.Ops[i])
		}
	}
	if c.Withdrawn {
		b = msgp.AppendKey(b, "ops_wd")
		b = append(b, 0xc3)
	}
	if c.Path != "" {
		b = msgp.AppendKey(b, "p")
		b = msgp.AppendStr(b, c.Path)
	}
	if c.Session != 0 {
		b = msgp.AppendKey(b, "s")
		b = msgp.AppendUint(b, c.Session)
	}
	if len(c.Secret) > 0 {
		b = msgp.AppendKey(b, "sec")
		b = msgp.AppendBin(b, c.Secret)
	}
	if len(c.Sessions) > 0 {
		b = msgp.AppendKey(b, "ss")
		b = msgp.AppendArrayLen(b, len(c.Sessions))
		for _, s := range c.Sessions {
			b = msgp.AppendUint(b, s)
		}
	}
	if c.Limits != nil {
		b = msgp.AppendKey(b, "st_lim")
		b = mpLimits(b, c.Limits)
	}
	if c.TTLMillis != 0 {
		b = msgp.AppendKey(b, "ttl")
		b = msgp.AppendInt(b, c.TTLMillis)
	}
	b = msgp.AppendKey(b, "v")
	return msgp.AppendInt(b, c.Version)
}

// mpCommandFields counts the fields mpCommand writes.
func mpCommandFields(c *Command) int {
	n := 2 // o, v
	for _, set := range [...]bool{
		len(c.ACL) > 0, c.ACLDefault != 0, c.Host != "", len(c.Data) > 0, c.Flags != 0,
		c.Identity != "", c.LockDelayMillis != 0, c.HoldTTLMillis != 0, c.RequestID != "",
		c.Try, c.Mode != 0, c.Member != nil, len(c.Ops) > 0, c.Withdrawn, c.Path != "",
		c.Session != 0, len(c.Secret) > 0, len(c.Sessions) > 0, c.Limits != nil, c.TTLMillis != 0,
	} {
		if set {
			n++
		}
	}
	return n
}

// mpCommandSize is len(mpCommand(nil, c)), field by field in its order.
func mpCommandSize(c *Command) int {
	n := msgp.ContainerLenSize(mpCommandFields(c))
	if len(c.ACL) > 0 {
		n += msgp.KeySize("acl") + msgp.ContainerLenSize(len(c.ACL))
		for i := range c.ACL {
			n += mpACLRuleSize(&c.ACL[i])
		}
	}
	if c.ACLDefault != 0 {
		n += msgp.KeySize("acl_d") + msgp.UintSize(uint64(c.ACLDefault))
	}
	if c.Host != "" {
		n += msgp.KeySize("acl_h") + msgp.StrSize(len(c.Host))
	}
	if len(c.Data) > 0 {
		n += msgp.KeySize("d") + msgp.BinSize(len(c.Data))
	}
	if c.Flags != 0 {
		n += msgp.KeySize("f") + msgp.UintSize(uint64(c.Flags))
	}
	if c.Identity != "" {
		n += msgp.KeySize("id") + msgp.StrSize(len(c.Identity))
	}
	if c.LockDelayMillis != 0 {
		n += msgp.KeySize("ld") + msgp.IntSize(c.LockDelayMillis)
	}
	if c.HoldTTLMillis != 0 {
		n += msgp.KeySize("lh") + msgp.IntSize(c.HoldTTLMillis)
	}
	if c.RequestID != "" {
		n += msgp.KeySize("lk_rid") + msgp.StrSize(len(c.RequestID))
	}
	if c.Try {
		n += msgp.KeySize("lk_try") + 1
	}
	if c.Mode != 0 {
		n += msgp.KeySize("lm") + msgp.UintSize(uint64(c.Mode))
	}
	if c.Member != nil {
		n += msgp.KeySize("m") + mpMemberSize(c.Member)
	}
	n += msgp.KeySize("o") + msgp.UintSize(uint64(c.Op))
	if len(c.Ops) > 0 {
		n += msgp.KeySize("ops") + msgp.ContainerLenSize(len(c.Ops))
		for i := range c.Ops {
			n += mpCommandSize(&c.Ops[i])
		}
	}
	if c.Withdrawn {
		n += msgp.KeySize("ops_wd") + 1
	}
	if c.Path != "" {
		n += msgp.KeySize("p") + msgp.StrSize(len(c.Path))
	}
	if c.Session != 0 {
		n += msgp.KeySize("s") + msgp.UintSize(c.Session)
	}
	if len(c.Secret) > 0 {
		n += msgp.KeySize("sec") + msgp.BinSize(len(c.Secret))
	}
	if len(c.Sessions) > 0 {
		n += msgp.KeySize("ss") + msgp.ContainerLenSize(len(c.Sessions))
		for _, s := range c.Sessions {
			n += msgp.UintSize(s)
		}
	}
	if c.Limits != nil {
		n += msgp.KeySize("st_lim") + mpLimitsSize(c.Limits)
	}
	if c.TTLMillis != 0 {
		n += msgp.KeySize("ttl") + msgp.IntSize(c.TTLMillis)
	}
	return n + msgp.KeySize("v") + msgp.IntSize(c.Version)
}

// mpMember: ID is always written, the rest when set.
func mpMember(b []byte, m *Member) []byte {
	n := 1
	for _, s := range [...]string{m.APIAddr, m.ClientAddr, m.HTTPAddr, m.RaftAddr} {
		if s != "" {
			n++
		}
	}
	b = msgp.AppendMapLen(b, n)
	if m.APIAddr != "" {
		b = msgp.AppendKey(b, "api_addr")
		b = msgp.AppendStr(b, m.APIAddr)
	}
	if m.ClientAddr != "" {
		b = msgp.AppendKey(b, "c")
		b = msgp.AppendStr(b, m.ClientAddr)
	}
	if m.HTTPAddr != "" {
		b = msgp.AppendKey(b, "h")
		b = msgp.AppendStr(b, m.HTTPAddr)
	}
	b = msgp.AppendKey(b, "id")
	b = msgp.AppendStr(b, m.ID)
	if m.RaftAddr != "" {
		b = msgp.AppendKey(b, "r")
		b = msgp.AppendStr(b, m.RaftAddr)
	}
	return b
}

func mpMemberSize(m *Member) int {
	n, fields := msgp.KeySize("id")+msgp.StrSize(len(m.ID)), 1
	for _, f := range [...]struct {
		key string
		v   string
	}{{"api_addr", m.APIAddr}, {"c", m.ClientAddr}, {"h", m.HTTPAddr}, {"r", m.RaftAddr}} {
		if f.v != "" {
			n += msgp.KeySize(f.key) + msgp.StrSize(len(f.v))
			fields++
		}
	}
	return msgp.ContainerLenSize(fields) + n
}

func mpACLRule(b []byte, r *ACLRule) []byte {
	if r.Perms != 0 {
		b = append(b, 0x83)
	} else {
		b = append(b, 0x82)
	}
	b = msgp.AppendKey(b, "i")
	b = msgp.AppendStr(b, r.Identity)
	b = msgp.AppendKey(b, "p")
	b = msgp.AppendStr(b, r.Prefix)
	if r.Perms != 0 {
		b = msgp.AppendKey(b, "r")
		b = msgp.AppendUint(b, uint64(r.Perms))
	}
	return b
}

func mpACLRuleSize(r *ACLRule) int {
	n := 1 + msgp.KeySize("i") + msgp.StrSize(len(r.Identity)) + msgp.KeySize("p") + msgp.StrSize(len(r.Prefix))
	if r.Perms != 0 {
		n += msgp.KeySize("r") + msgp.UintSize(uint64(r.Perms))
	}
	return n
}

// mpLimits: no Limits field is omitempty.
func mpLimits(b []byte, l *Limits) []byte {
	b = append(b, 0x8b)
	for _, f := range mpLimitsFields(l) {
		b = msgp.AppendKey(b, f.key)
		b = msgp.AppendInt(b, f.v)
	}
	return b
}

func mpLimitsSize(l *Limits) int {
	n := 1
	for _, f := range mpLimitsFields(l) {
		n += msgp.KeySize(f.key) + msgp.IntSize(f.v)
	}
	return n
}

type mpLimitsField struct {
	key string
	v   int64
}

// mpLimitsFields lists l's fields in the order of their sorted tags.
func mpLimitsFields(l *Limits) [11]mpLimitsField {
	return [...]mpLimitsField{
		{"data", int64(l.MaxDataBytes)},
		{"depth", int64(l.MaxDepth)},
		{"lk_maxsess", int64(l.MaxLockRequestsPerSession)},
		{"lockbatch", int64(l.MaxLockBatch)},
		{"lockdelay", l.DefaultLockDelayMillis},
		{"maxlockdelay", l.MaxLockDelayMillis},
		{"multi", int64(l.MaxMultiOps)},
		{"ops_lockhist", int64(l.LockHistoryMax)},
		{"ops_lockhistage", l.LockHistoryMaxAgeMillis},
		{"page", int64(l.MaxChildrenPage)},
		{"path", int64(l.MaxPathBytes)},
	}
}

// decodeEntryFast decodes b, or declines (false) for DecodeEntry to run
// the reflection decoder: it succeeds only where that decoder gives the
// same entry.
func decodeEntryFast(b []byte) (*Entry, bool) {
	r := entryReader{b: b}
	e := new(Entry)
	n := r.mapLen()
	var seen uint8
	for i := 0; i < n && r.ok(); i++ {
		switch string(r.key()) {
		case "c":
			r.once(&seen, 1)
			r.command(&e.Cmd, false)
		case "t":
			r.once(&seen, 2)
			e.Time = r.int()
		default:
			r.bad = true
		}
	}
	if !r.ok() || r.off != len(b) {
		return nil, false
	}
	return e, true
}

// entryReader reads msgpack from b. A read that meets anything the fast
// path does not take sets bad and returns a zero value; every later read
// is then a no-op, and the caller checks bad once.
type entryReader struct {
	b   []byte
	off int
	bad bool
}

func (r *entryReader) ok() bool { return !r.bad }

// once marks a field seen and refuses a second one: go-msgpack would
// decode a repeated field over the first (merging into a slice's
// elements), which the fast path does not copy.
func (r *entryReader) once(seen *uint8, bit uint8) {
	if *seen&bit != 0 {
		r.bad = true
	}
	*seen |= bit
}

func (r *entryReader) onceCmd(seen *uint32, bit uint) {
	if *seen&(1<<bit) != 0 {
		r.bad = true
	}
	*seen |= 1 << bit
}

// command decodes a map into c. Inside a multi (nested) an "ops" field is
// declined: the fast path keeps its nesting well inside MaxDepth.
func (r *entryReader) command(c *Command, nested bool) {
	n := r.mapLen()
	var seen uint32
	for i := 0; i < n && r.ok(); i++ {
		switch string(r.key()) {
		case "o":
			r.onceCmd(&seen, 0)
			c.Op = Op(r.uint8())
		case "p":
			r.onceCmd(&seen, 1)
			c.Path = r.str()
		case "d":
			r.onceCmd(&seen, 2)
			c.Data = r.bytes()
		case "f":
			r.onceCmd(&seen, 3)
			c.Flags = CreateFlags(r.uint8())
		case "v":
			r.onceCmd(&seen, 4)
			c.Version = r.int()
		case "s":
			r.onceCmd(&seen, 5)
			c.Session = r.uint()
		case "ss":
			r.onceCmd(&seen, 6)
			c.Sessions = r.uints()
		case "sec":
			r.onceCmd(&seen, 7)
			c.Secret = r.bytes()
		case "ttl":
			r.onceCmd(&seen, 8)
			c.TTLMillis = r.int()
		case "id":
			r.onceCmd(&seen, 9)
			c.Identity = r.str()
		case "acl_h":
			r.onceCmd(&seen, 10)
			c.Host = r.str()
		case "ops":
			r.onceCmd(&seen, 11)
			if nested {
				r.bad = true
				break
			}
			c.Ops = r.commands()
		case "m":
			r.onceCmd(&seen, 12)
			c.Member = r.member()
		case "lm":
			r.onceCmd(&seen, 13)
			c.Mode = LockMode(r.uint8())
		case "lh":
			r.onceCmd(&seen, 14)
			c.HoldTTLMillis = r.int()
		case "ld":
			r.onceCmd(&seen, 15)
			c.LockDelayMillis = r.int()
		case "lk_try":
			r.onceCmd(&seen, 16)
			c.Try = r.bool()
		case "lk_rid":
			r.onceCmd(&seen, 17)
			c.RequestID = r.str()
		case "acl_d":
			r.onceCmd(&seen, 18)
			c.ACLDefault = Perm(r.uint8())
		case "ops_wd":
			r.onceCmd(&seen, 19)
			c.Withdrawn = r.bool()
		default: // "acl", "st_lim" (rare: the reflection decoder's), or unknown
			r.bad = true
		}
	}
}

func (r *entryReader) commands() []Command {
	n := r.arrayLen()
	if r.bad {
		return nil
	}
	cs := make([]Command, n)
	for i := range cs {
		r.command(&cs[i], true)
		if r.bad {
			return nil
		}
	}
	return cs
}

func (r *entryReader) member() *Member {
	n := r.mapLen()
	m := new(Member)
	var seen uint8
	for i := 0; i < n && r.ok(); i++ {
		switch string(r.key()) {
		case "id":
			r.once(&seen, 1)
			m.ID = r.str()
		case "r":
			r.once(&seen, 2)
			m.RaftAddr = r.str()
		case "c":
			r.once(&seen, 4)
			m.ClientAddr = r.str()
		case "h":
			r.once(&seen, 8)
			m.HTTPAddr = r.str()
		case "api_addr":
			r.once(&seen, 16)
			m.APIAddr = r.str()
		default:
			r.bad = true
		}
	}
	return m
}

func (r *entryReader) uints() []uint64 {
	n := r.arrayLen()
	if r.bad {
		return nil
	}
	s := make([]uint64, n)
	for i := range s {
		s[i] = r.uint()
	}
	return s
}

// next reads n bytes, or fails (a length header larger than what is left
// allocates nothing).
func (r *entryReader) next(n int) []byte {
	if r.bad || n > len(r.b)-r.off {
		r.bad = true
		return nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

func (r *entryReader) byte() byte {
	if r.bad || r.off >= len(r.b) {
		r.bad = true
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

// mapLen reads a map header. Every entry takes at least two bytes: a
// length beyond that is declined before any loop or allocation.
func (r *entryReader) mapLen() int {
	return r.containerLen(0x80, 0xde, 2)
}

// arrayLen reads an array header; every element takes at least a byte.
func (r *entryReader) arrayLen() int {
	return r.containerLen(0x90, 0xdc, 1)
}

func (r *entryReader) containerLen(fix, b16 byte, unit int) int {
	c := r.byte()
	var n int
	switch {
	case r.bad:
		return 0
	case c&0xf0 == fix:
		n = int(c & 0x0f)
	case c == b16:
		n = r.be16OrZero()
	case c == b16+1:
		n = r.be32OrZero()
	default:
		r.bad = true
		return 0
	}
	if n > (len(r.b)-r.off)/unit {
		r.bad = true
		return 0
	}
	return n
}

func (r *entryReader) be16OrZero() int {
	p := r.next(2)
	if p == nil {
		return 0
	}
	return int(binary.BigEndian.Uint16(p))
}

func (r *entryReader) be32OrZero() int {
	p := r.next(4)
	if p == nil {
		return 0
	}
	return int(binary.BigEndian.Uint32(p))
}

// raw reads a str or bin (go-msgpack reads either into a string or a
// []byte) and returns a view of its bytes.
func (r *entryReader) raw() []byte {
	c := r.byte()
	var n int
	switch {
	case r.bad:
		return nil
	case c >= 0xa0 && c <= 0xbf:
		n = int(c & 0x1f)
	case c == 0xd9 || c == 0xc4:
		n = int(r.byte())
	case c == 0xda || c == 0xc5:
		n = r.be16OrZero()
	case c == 0xdb || c == 0xc6:
		n = r.be32OrZero()
	default:
		r.bad = true
		return nil
	}
	return r.next(n)
}

// key reads a field name; the caller's switch on string(key) allocates
// nothing.
func (r *entryReader) key() []byte { return r.raw() }

func (r *entryReader) str() string { return string(r.raw()) }

// bytes copies: the entry outlives b. Empty is []byte{}, not nil, as
// go-msgpack decodes it.
func (r *entryReader) bytes() []byte {
	p := r.raw()
	if r.bad {
		return nil
	}
	return append([]byte{}, p...)
}

// int reads any msgpack integer into an int64 as go-msgpack's DecodeInt64
// does (a uint64 above MaxInt64 wraps, as there).
func (r *entryReader) int() int64 {
	c := r.byte()
	switch {
	case r.bad:
		return 0
	case c <= 0x7f || c >= 0xe0:
		return int64(int8(c))
	case c == 0xcc:
		return int64(r.byte())
	case c == 0xcd:
		return int64(r.be16OrZero())
	case c == 0xce:
		return int64(r.be32OrZero())
	case c == 0xcf:
		return int64(r.be64())
	case c == 0xd0:
		return int64(int8(r.byte()))
	case c == 0xd1:
		return int64(int16(r.be16OrZero()))
	case c == 0xd2:
		return int64(int32(r.be32OrZero()))
	case c == 0xd3:
		return int64(r.be64())
	}
	r.bad = true
	return 0
}

// uint reads a non-negative msgpack integer; go-msgpack refuses a
// negative one.
func (r *entryReader) uint() uint64 {
	c := r.byte()
	switch {
	case r.bad:
		return 0
	case c <= 0x7f:
		return uint64(c)
	case c == 0xcc:
		return uint64(r.byte())
	case c == 0xcd:
		return uint64(r.be16OrZero())
	case c == 0xce:
		return uint64(r.be32OrZero())
	case c == 0xcf:
		return r.be64()
	case c >= 0xd0 && c <= 0xd3:
		r.off-- // signed: reread as int
		if v := r.int(); v >= 0 && !r.bad {
			return uint64(v)
		}
	}
	r.bad = true
	return 0
}

// uint8 reads an integer for a uint8 type; go-msgpack refuses overflow.
func (r *entryReader) uint8() uint8 {
	v := r.uint()
	if v > math.MaxUint8 {
		r.bad = true
		return 0
	}
	return uint8(v)
}

func (r *entryReader) be64() uint64 {
	p := r.next(8)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint64(p)
}

// bool reads true/false, or fixint 0/1 as go-msgpack's DecodeBool does.
func (r *entryReader) bool() bool {
	switch c := r.byte(); {
	case r.bad:
		return false
	case c == 0xc3 || c == 1:
		return true
	case c == 0xc2 || c == 0:
		return false
	}
	r.bad = true
	return false
}
