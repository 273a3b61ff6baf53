package namespace

import (
	"github.com/latch-io/latch/namespace/msgp"
)

// The raft log format is what go-msgpack's reflection codec, configured as
// entryHandle, makes of Entry. Reflection costs on the hot path: on the
// leader every proposal runs the encoder on a fresh goroutine whose stack
// its recursion grows (runtime.newstack/copystack), and every member runs
// the decoder on every applied entry. This file writes the same bytes by
// hand, and entrydecode.go reads them:
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
