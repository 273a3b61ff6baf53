package namespace

import (
	"math"

	"github.com/latch-io/latch/namespace/msgp"
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
//     []byte as bin; namespace/msgp writes these forms.
//   - decodeEntryFast reads the forms the encoder writes (any map/array
//     header width, str for a string, bin for a []byte, any integer width
//     that fits the field), through msgp.Reader, and declines anything
//     else: nil, a struct as an array, a repeated field, a multi inside a
//     multi, ACL rules, limits, an unknown field, a str where bin is
//     written or the reverse, a signed form for an unsigned field, an
//     integer that does not fit, a bool as an integer, bytes left over.
//     DecodeEntry then runs the reflection decoder, so every entry
//     decodes, and fails, exactly as before; no latch version wrote the
//     declined forms.

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
	if len(c.Else) > 0 {
		b = msgp.AppendKey(b, "txn_else")
		b = msgp.AppendArrayLen(b, len(c.Else))
		for i := range c.Else {
			b = mpCommand(b, &c.Else[i])
		}
	}
	if len(c.Compares) > 0 {
		b = msgp.AppendKey(b, "txn_if")
		b = msgp.AppendArrayLen(b, len(c.Compares))
		for i := range c.Compares {
			b = mpCompare(b, &c.Compares[i])
		}
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
		len(c.Else) > 0, len(c.Compares) > 0,
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
	if len(c.Else) > 0 {
		n += msgp.KeySize("txn_else") + msgp.ContainerLenSize(len(c.Else))
		for i := range c.Else {
			n += mpCommandSize(&c.Else[i])
		}
	}
	if len(c.Compares) > 0 {
		n += msgp.KeySize("txn_if") + msgp.ContainerLenSize(len(c.Compares))
		for i := range c.Compares {
			n += mpCompareSize(&c.Compares[i])
		}
	}
	return n + msgp.KeySize("v") + msgp.IntSize(c.Version)
}

// mpCompare: p and t always, c, n and v when set (sorted: c n p t v).
func mpCompare(b []byte, c *Compare) []byte {
	b = msgp.AppendMapLen(b, mpCompareFields(c))
	if c.Op != 0 {
		b = msgp.AppendKey(b, "c")
		b = msgp.AppendUint(b, uint64(c.Op))
	}
	if c.Number != 0 {
		b = msgp.AppendKey(b, "n")
		b = msgp.AppendInt(b, c.Number)
	}
	b = msgp.AppendKey(b, "p")
	b = msgp.AppendStr(b, c.Path)
	b = msgp.AppendKey(b, "t")
	b = msgp.AppendUint(b, uint64(c.Target))
	if len(c.Value) > 0 {
		b = msgp.AppendKey(b, "v")
		b = msgp.AppendBin(b, c.Value)
	}
	return b
}

func mpCompareFields(c *Compare) int {
	n := 2
	for _, set := range [...]bool{c.Op != 0, c.Number != 0, len(c.Value) > 0} {
		if set {
			n++
		}
	}
	return n
}

func mpCompareSize(c *Compare) int {
	n := msgp.ContainerLenSize(mpCompareFields(c)) + msgp.KeySize("p") + msgp.StrSize(len(c.Path)) +
		msgp.KeySize("t") + msgp.UintSize(uint64(c.Target))
	if c.Op != 0 {
		n += msgp.KeySize("c") + msgp.UintSize(uint64(c.Op))
	}
	if c.Number != 0 {
		n += msgp.KeySize("n") + msgp.IntSize(c.Number)
	}
	if len(c.Value) > 0 {
		n += msgp.KeySize("v") + msgp.BinSize(len(c.Value))
	}
	return n
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
	fields := mpLimitsFields(l)
	b = msgp.AppendMapLen(b, len(fields))
	for _, f := range fields {
		b = msgp.AppendKey(b, f.key)
		b = msgp.AppendInt(b, f.v)
	}
	return b
}

func mpLimitsSize(l *Limits) int {
	fields := mpLimitsFields(l)
	n := msgp.ContainerLenSize(len(fields))
	for _, f := range fields {
		n += msgp.KeySize(f.key) + msgp.IntSize(f.v)
	}
	return n
}

type mpLimitsField struct {
	key string
	v   int64
}

// mpLimitsFields lists l's fields in the order of their sorted tags.
func mpLimitsFields(l *Limits) [13]mpLimitsField {
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
		{"ttl_max", l.MaxSessionTTLMillis},
		{"ttl_min", l.MinSessionTTLMillis},
	}
}

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
