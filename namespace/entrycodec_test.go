package namespace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/latch-io/latch/namespace/internal/fieldfill"
)

// reflectEncode is the log format's definition: go-msgpack's reflection
// encoder under entryHandle, what EncodeEntry ran before entrycodec.go.
func reflectEncode(t testing.TB, e *Entry) []byte {
	t.Helper()
	var b []byte
	if err := codec.NewEncoderBytes(&b, entryHandle).Encode(e); err != nil {
		t.Fatal(err)
	}
	return b
}

// reflectDecode is DecodeEntry before entrycodec.go.
func reflectDecode(b []byte) (e *Entry, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, err = nil, errors.New("panic")
		}
	}()
	return decodeEntryReflect(b)
}

// checkEntryCodec: the hand encoding of e is byte for byte the reflection
// encoding, sized exactly, and decodes to what the reflection decoder
// gives. It reports whether the fast decoder took it.
func checkEntryCodec(t testing.TB, e *Entry) (fast bool) {
	t.Helper()
	want := reflectEncode(t, e)
	got, err := EncodeEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("EncodeEntry(%+v)\n got %x\nwant %x", e, got, want)
	}
	if len(got) != cap(got) {
		t.Fatalf("EncodeEntry: len %d, cap %d: mpEntrySize is wrong", len(got), cap(got))
	}
	checkDecodeAgrees(t, got)
	_, fast = decodeEntryFast(got)
	return fast
}

// checkDecodeAgrees: DecodeEntry and the reflection decoder both fail, or
// give deep-equal entries.
func checkDecodeAgrees(t testing.TB, b []byte) {
	t.Helper()
	got, err := DecodeEntry(b)
	want, wantErr := reflectDecode(b)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("decode %x: DecodeEntry error %v, reflection decoder error %v", b, err, wantErr)
	}
	if err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("decode %x: error %v does not wrap ErrMalformed", b, err)
		}
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decode %x:\n got %#v\nwant %#v", b, got, want)
	}
	if fast, ok := decodeEntryFast(b); ok && !reflect.DeepEqual(fast, want) {
		t.Fatalf("fast decode %x:\n got %#v\nwant %#v", b, fast, want)
	}
}

// entryCodecCases are the commands the server proposes, with realistic
// fields, and the edges of every length and integer form.
func entryCodecCases() (hot, rare map[string]*Entry) {
	const now = 1_763_900_000_123_456_789
	l := DefaultLimits()
	long := strings.Repeat("p", 40)
	set := Command{Op: OpSet, Path: "/latch-bench-0123456789ab/k00042", Data: make([]byte, 100), Version: AnyVersion,
		Session: 1_763_900_000, Identity: "CN=bench-client"}
	hot = map[string]*Entry{
		"noop":            {Time: now, Cmd: Command{Op: OpNoop}},
		"create":          {Time: now, Cmd: Command{Op: OpCreate, Path: "/svc/q-", Data: []byte("x\x00y"), Flags: FlagEphemeral | FlagSequential, Version: AnyVersion, Session: 7, Identity: "CN=alice"}},
		"set":             {Time: now, Cmd: set},
		"set versioned":   {Time: now, Cmd: Command{Op: OpSet, Path: "/a", Data: []byte("v"), Version: 1 << 40}},
		"delete":          {Time: now, Cmd: Command{Op: OpDelete, Path: "/x", Version: 3, Session: 9}},
		"check":           {Time: now, Cmd: Command{Op: OpCheck, Path: "/c", Version: 0}},
		"multi":           {Time: now, Cmd: Command{Op: OpMulti, Identity: "CN=bench", Ops: []Command{set, {Op: OpCreate, Path: "/n", Data: []byte{}, Version: AnyVersion}, {Op: OpDelete, Path: "/d", Version: 200}, {Op: OpCheck, Path: "/c", Version: 70000}}}},
		"session open":    {Time: now, Cmd: Command{Op: OpSessionOpen, Secret: bytes.Repeat([]byte{0xfe}, 32), TTLMillis: 10_000, Identity: "CN=alice", Host: "10.0.0.7"}},
		"session close":   {Time: now, Cmd: Command{Op: OpSessionClose, Session: 1 << 33, Identity: "CN=alice"}},
		"session expire":  {Time: now, Cmd: Command{Op: OpSessionExpire, Sessions: []uint64{1, 127, 128, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, math.MaxUint64}}},
		"set member":      {Time: now, Cmd: Command{Op: OpSetMember, Member: &Member{ID: "n1", RaftAddr: "10.0.0.1:7000", ClientAddr: "10.0.0.1:7001", HTTPAddr: "10.0.0.1:7002", APIAddr: "10.0.0.1:7003"}}},
		"set member id":   {Time: now, Cmd: Command{Op: OpSetMember, Member: &Member{ID: "n2"}}},
		"remove member":   {Time: now, Cmd: Command{Op: OpRemoveMember, Member: &Member{ID: ""}}},
		"lock request":    {Time: now, Cmd: Command{Op: OpLockRequest, Path: "/latch-bench-0123456789ab/contended/l3", Session: 123456, Identity: "bench-client", RequestID: "r-1234", Mode: LockShared, HoldTTLMillis: 30_000, LockDelayMillis: NoLockDelay, Try: true}},
		"lock cancel":     {Time: now, Cmd: Command{Op: OpLockCancel, Path: "/l/lock-0000000001", Session: 5, Withdrawn: true}},
		"lock release":    {Time: now, Cmd: Command{Op: OpLockRelease, Path: "/l/lock-0000000001", Session: 5}},
		"lock renew":      {Time: now, Cmd: Command{Op: OpLockRenew, Path: "/l/lock-0000000001", Session: 5}},
		"hash check":      {Time: now, Cmd: Command{Op: OpHashCheck, Data: bytes.Repeat([]byte{1}, 32), Version: 99}},
		"acl default":     {Time: now, Cmd: Command{Op: OpACLBootstrap, ACLDefault: PermRead}},
		"str8":            {Time: now, Cmd: Command{Op: OpSet, Path: "/" + long, Identity: long[:31], RequestID: long[:32]}},
		"str16 bin16":     {Time: now, Cmd: Command{Op: OpSet, Path: "/" + strings.Repeat("q", 300), Data: make([]byte, 256)}},
		"str32 bin32":     {Time: now, Cmd: Command{Op: OpSet, Path: "/" + strings.Repeat("q", 70000), Data: make([]byte, 65536)}},
		"array16":         {Time: now, Cmd: Command{Op: OpSessionExpire, Sessions: make([]uint64, 16)}},
		"array32":         {Time: now, Cmd: Command{Op: OpSessionExpire, Sessions: make([]uint64, 65536)}},
		"negative":        {Time: -1, Cmd: Command{Op: OpSet, Version: -32, TTLMillis: -33, HoldTTLMillis: -128, LockDelayMillis: -129}},
		"int widths":      {Time: math.MinInt64, Cmd: Command{Op: OpSet, Version: math.MaxInt64, TTLMillis: 128, HoldTTLMillis: 32768, LockDelayMillis: -32769}},
		"int32 edges":     {Time: math.MaxInt32, Cmd: Command{Op: OpSet, Version: math.MinInt32, TTLMillis: math.MaxInt32 + 1, HoldTTLMillis: math.MinInt32 - 1, LockDelayMillis: math.MinInt16}},
		"uint8 edges":     {Time: 127, Cmd: Command{Op: Op(255), Flags: CreateFlags(128), Mode: LockMode(127), ACLDefault: Perm(200), Session: 128}},
		"all empty":       {},
		"multi of multi":  {Time: now, Cmd: Command{Op: OpMulti, Ops: []Command{{Op: OpMulti, Ops: []Command{{Op: OpSet, Path: "/a"}}}}}},
		"many fields":     {Time: now, Cmd: Command{Op: OpMulti, Ops: make([]Command, 17)}},
		"every cmd field": {Time: now, Cmd: Command{Op: OpSet, Path: "/p", Data: []byte("d"), Flags: 1, Version: 2, Session: 3, Sessions: []uint64{4}, Secret: []byte("s"), TTLMillis: 5, Identity: "i", Host: "h", Ops: []Command{{}}, Member: &Member{ID: "m"}, Mode: 1, HoldTTLMillis: 6, LockDelayMillis: 7, Try: true, RequestID: "r", ACLDefault: 8, Withdrawn: true}},
		"get":             {Time: now, Cmd: Command{Op: OpGet, Path: "/g", Version: AnyVersion}},
		"txn": {Time: now, Cmd: Command{Op: OpTxn, Identity: "CN=bench",
			Compares: []Compare{{Path: "/a", Target: CmpValue, Value: []byte("x")}, {Path: "/b", Target: CmpVersion, Op: CmpGreater, Number: -3}, {Path: "/c", Target: CmpExists}},
			Ops:      []Command{set, {Op: OpGet, Path: "/a", Version: AnyVersion}},
			Else:     []Command{{Op: OpCreate, Path: "/a", Data: []byte("x"), Version: AnyVersion}, {Op: OpCheck, Path: "/c", Version: 4}}}},
	}
	rare = map[string]*Entry{
		"acl bootstrap": {Time: now, Cmd: Command{Op: OpACLBootstrap, ACLDefault: PermNone, ACL: []ACLRule{{Identity: "CN=admin", Prefix: "/", Perms: PermAll}, {Identity: "", Prefix: "/pub"}}}},
		"acl set":       {Time: now, Cmd: Command{Op: OpACLSet, Identity: "CN=admin", ACL: []ACLRule{{Identity: "CN=bob", Prefix: "/bob", Perms: PermRWCD}}}},
		"acl remove":    {Time: now, Cmd: Command{Op: OpACLRemove, Identity: "CN=admin", ACL: []ACLRule{{Identity: "CN=bob", Prefix: "/bob"}}}},
		"set limits":    {Time: now, Cmd: Command{Op: OpSetLimits, Identity: "CN=admin", Limits: &l}},
		"zero limits":   {Time: now, Cmd: Command{Op: OpSetLimits, Limits: &Limits{MaxDataBytes: -1, LockHistoryMaxAgeMillis: math.MaxInt64}}},
		"multi acl":     {Time: now, Cmd: Command{Op: OpMulti, Ops: []Command{{Op: OpACLSet, ACL: []ACLRule{{Prefix: "/"}}}}}},
	}
	return hot, rare
}

// TestEntryCodecOps: every op's command encodes to the reflection bytes and
// decodes as the reflection decoder decodes it; the hot ones take the fast
// decoder, the rare ones (ACL rules, limits, a multi in a multi) fall back.
func TestEntryCodecOps(t *testing.T) {
	hot, rare := entryCodecCases()
	for name, e := range hot {
		t.Run(name, func(t *testing.T) {
			fast := checkEntryCodec(t, e)
			if nested := name == "multi of multi"; fast == nested {
				t.Errorf("fast decoder took it: %v, want %v", fast, !nested)
			}
		})
	}
	for name, e := range rare {
		t.Run(name, func(t *testing.T) {
			if checkEntryCodec(t, e) {
				t.Error("fast decoder took a command it leaves to the reflection decoder")
			}
		})
	}
	covered := map[Op]bool{}
	for _, m := range []map[string]*Entry{hot, rare} {
		for _, e := range m {
			covered[e.Cmd.Op] = true
		}
	}
	for op, name := range opNames {
		if name != "" && !covered[Op(op)] {
			t.Errorf("no case for %s", name)
		}
	}
}

// mp builds msgpack by hand for the decoder tests.
type mp []byte

func (m mp) fixmap(n int) mp             { return append(m, 0x80|byte(n)) }
func (m mp) key(k string) mp             { return append(append(m, 0xa0|byte(len(k))), k...) }
func (m mp) raw(b ...byte) mp            { return append(m, b...) }
func (m mp) str8(s string) mp            { return append(append(m, 0xd9, byte(len(s))), s...) }
func (m mp) bin8(s string) mp            { return append(append(m, 0xc4, byte(len(s))), s...) }
func (m mp) map16(n int) mp              { return binary.BigEndian.AppendUint16(append(m, 0xde), uint16(n)) }
func (m mp) map32(n int) mp              { return binary.BigEndian.AppendUint32(append(m, 0xdf), uint32(n)) }
func (m mp) array16(n int) mp            { return binary.BigEndian.AppendUint16(append(m, 0xdc), uint16(n)) }
func (m mp) u64(v uint64) mp             { return binary.BigEndian.AppendUint64(append(m, 0xcf), v) }
func (m mp) entry(fields int) mp         { return m.fixmap(2).key("t").raw(1).key("c").fixmap(fields) }
func entryWith(fields ...func(mp) mp) mp { return buildEntry(mp(nil).entry(len(fields)), fields) }

func buildEntry(m mp, fields []func(mp) mp) mp {
	for _, f := range fields {
		m = f(m)
	}
	return m
}

// TestDecodeEntryForms: encodings the reflection encoder does not write
// (other msgpack writers may) decode as the reflection decoder decodes
// them; the fast decoder takes the header and integer widths it knows and
// declines the rest (a str for bin or the reverse, a signed form for an
// unsigned field, a wrapping integer, a bool as an integer), never
// guessing.
func TestDecodeEntryForms(t *testing.T) {
	cases := []struct {
		name string
		b    mp
		fast bool
	}{
		{"fields in struct order", entryWith(func(m mp) mp { return m.key("o").raw(2) }, func(m mp) mp { return m.key("p").raw(0xa2, '/', 'a') }, func(m mp) mp { return m.key("v").raw(0xff) }), true},
		{"map16 headers", mp(nil).map16(1).key("c").map32(2).key("o").raw(2).key("ss").array16(2).raw(1, 2), true},
		{"str8 key and value", entryWith(func(m mp) mp { return m.str8("p").str8("/short") }), true},
		{"empty data", entryWith(func(m mp) mp { return m.key("d").raw(0xc4, 0) }), true},
		{"empty sessions", entryWith(func(m mp) mp { return m.key("ss").raw(0x90) }), true},
		{"empty ops", entryWith(func(m mp) mp { return m.key("ops").raw(0x90) }), true},
		{"empty member", entryWith(func(m mp) mp { return m.key("m").raw(0x80) }), true},
		{"empty cmd", mp(nil).fixmap(1).key("c").raw(0x80), true},
		{"empty entry", mp(nil).fixmap(0), true},
		{"wide uints", entryWith(func(m mp) mp { return m.key("o").raw(0xcd, 0, 5) }, func(m mp) mp { return m.key("s").u64(9) }), true},
		{"uint version", entryWith(func(m mp) mp { return m.key("v").raw(0xcc, 200) }), true},
		{"bool false", entryWith(func(m mp) mp { return m.key("lk_try").raw(0xc2) }), true},

		{"bin string", entryWith(func(m mp) mp { return m.key("id").bin8("CN=x") }), false},
		{"str data", entryWith(func(m mp) mp { return m.key("d").raw(0xa3, 'a', 'b', 'c') }), false},
		{"empty str data", entryWith(func(m mp) mp { return m.key("sec").raw(0xa0) }), false},
		{"signed uint", entryWith(func(m mp) mp { return m.key("s").raw(0xd0, 5) }, func(m mp) mp { return m.key("f").raw(0xd3, 0, 0, 0, 0, 0, 0, 0, 1) }), false},
		{"uint64 wraps into int64", entryWith(func(m mp) mp { return m.key("v").u64(math.MaxUint64) }), false},
		{"bool as int", entryWith(func(m mp) mp { return m.key("lk_try").raw(1) }, func(m mp) mp { return m.key("ops_wd").raw(0) }), false},
		{"nil field", entryWith(func(m mp) mp { return m.key("p").raw(0xc0) }), false},
		{"nil cmd", mp(nil).fixmap(1).key("c").raw(0xc0), false},
		{"nil entry", mp{0xc0}, false},
		{"struct as array", mp(nil).fixmap(1).key("c").raw(0x92, 1, 0xa1, 'x'), false},
		{"repeated field", entryWith(func(m mp) mp { return m.key("p").raw(0xa1, 'a') }, func(m mp) mp { return m.key("p").raw(0xa1, 'b') }), false},
		{"repeated ops", entryWith(func(m mp) mp { return m.key("ops").raw(0x91, 0x81, 0xa1, 'o', 2) }, func(m mp) mp { return m.key("ops").raw(0x91, 0x81, 0xa1, 'p', 0xa1, 'x') }), false},
		{"repeated time", mp(nil).fixmap(2).key("t").raw(1).key("t").raw(2), false},
		{"bytes as array", entryWith(func(m mp) mp { return m.key("d").raw(0x92, 1, 2) }), false},
		{"unknown field", entryWith(func(m mp) mp { return m.key("zz").raw(1) }), false},
		{"unknown member field", entryWith(func(m mp) mp { return m.key("m").raw(0x81).key("x").raw(1) }), false},
		{"op overflow", entryWith(func(m mp) mp { return m.key("o").raw(0xcd, 1, 0) }), false},
		{"negative session", entryWith(func(m mp) mp { return m.key("s").raw(0xff) }), false},
		{"negative int8 session", entryWith(func(m mp) mp { return m.key("s").raw(0xd0, 0x80) }), false},
		{"float version", entryWith(func(m mp) mp { return m.key("v").raw(0xca, 0, 0, 0, 0) }), false},
		{"bool as 2", entryWith(func(m mp) mp { return m.key("lk_try").raw(2) }), false},
		{"trailing", append(entryWith(), 0xc0), false},
		{"truncated", entryWith(func(m mp) mp { return m.key("p").raw(0xa5, 'a') }), false},
		{"huge map", mp(nil).map32(math.MaxUint32), false},
		{"huge sessions", entryWith(func(m mp) mp { return m.key("ss").raw(0xdd, 0xff, 0xff, 0xff, 0xff) }), false},
		{"huge str", entryWith(func(m mp) mp { return m.key("p").raw(0xdb, 0xff, 0xff, 0xff, 0xff) }), false},
		{"acl", entryWith(func(m mp) mp { return m.key("acl").raw(0x90) }), false},
		{"limits", entryWith(func(m mp) mp { return m.key("st_lim").raw(0x80) }), false},
		{"ext", entryWith(func(m mp) mp { return m.key("p").raw(0xd4, 1, 1) }), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkDecodeAgrees(t, c.b)
			if _, fast := decodeEntryFast(c.b); fast != c.fast {
				t.Errorf("fast decoder took it: %v, want %v", fast, c.fast)
			}
		})
	}
}

// TestDecodeEntryDepth: the reflection decoder refuses nesting at depth 8
// (MaxDepth); the fast decoder declines a multi inside a multi, so it
// never reaches that far.
func TestDecodeEntryDepth(t *testing.T) {
	e := &Entry{Cmd: Command{Op: OpSet}}
	for range 4 {
		e.Cmd = Command{Op: OpMulti, Ops: []Command{e.Cmd}}
	}
	b, err := EncodeEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, reflectEncode(t, e)) {
		t.Fatal("deep multi: encodings differ")
	}
	if _, err := DecodeEntry(b); !errors.Is(err, ErrMalformed) {
		t.Fatalf("multi nested 4 deep decoded: %v", err)
	}
	checkDecodeAgrees(t, b)
}

// entryGen builds an Entry from fuzz bytes: values near every boundary of
// msgpack's integer and length forms, and every field.
type entryGen struct{ b []byte }

func (g *entryGen) byte() byte {
	if len(g.b) == 0 {
		return 0
	}
	c := g.b[0]
	g.b = g.b[1:]
	return c
}

func (g *entryGen) u64() uint64 {
	edges := [...]uint64{0, 1, 31, 32, 127, 128, 255, 256, 65535, 65536, 1<<31 - 1, 1 << 31, 1<<32 - 1, 1 << 32, 1<<63 - 1, 1 << 63, math.MaxUint64}
	switch c := g.byte(); {
	case c < 128:
		v := edges[int(c)%len(edges)]
		switch c % 3 {
		case 1:
			v++
		case 2:
			v--
		}
		return v
	case c < 192:
		return uint64(g.byte())
	default:
		var v uint64
		for range 8 {
			v = v<<8 | uint64(g.byte())
		}
		return v
	}
}

func (g *entryGen) i64() int64 {
	v := int64(g.u64())
	if g.byte()&1 == 1 {
		return -v
	}
	return v
}

func (g *entryGen) str() string { return string(g.bytes()) }

func (g *entryGen) bytes() []byte {
	n := int(g.byte())
	switch n {
	case 250:
		n = int(g.u64() % 70_000)
	case 251:
		return nil
	case 252:
		return []byte{}
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i) ^ g.byte()
	}
	return b
}

func (g *entryGen) command(depth int) Command {
	var c Command
	mask := uint32(g.byte()) | uint32(g.byte())<<8 | uint32(g.byte())<<16
	on := func(bit int) bool { return mask&(1<<bit) != 0 }
	c.Op = Op(g.byte())
	c.Version = g.i64()
	if on(0) {
		c.Path = g.str()
	}
	if on(1) {
		c.Data = g.bytes()
	}
	if on(2) {
		c.Flags = CreateFlags(g.byte())
	}
	if on(3) {
		c.Session = g.u64()
	}
	if on(4) {
		c.Sessions = make([]uint64, int(g.byte())%20)
		for i := range c.Sessions {
			c.Sessions[i] = g.u64()
		}
	}
	if on(5) {
		c.Secret = g.bytes()
	}
	if on(6) {
		c.TTLMillis = g.i64()
	}
	if on(7) {
		c.Identity = g.str()
	}
	if on(8) {
		c.Host = g.str()
	}
	if on(9) && depth < 3 {
		c.Ops = make([]Command, int(g.byte())%5)
		for i := range c.Ops {
			c.Ops[i] = g.command(depth + 1)
		}
	}
	if on(10) {
		c.Member = &Member{ID: g.str()}
		if g.byte()&1 == 1 {
			c.Member.RaftAddr, c.Member.ClientAddr, c.Member.HTTPAddr, c.Member.APIAddr = g.str(), g.str(), g.str(), g.str()
		}
	}
	if on(11) {
		c.Mode = LockMode(g.byte())
	}
	if on(12) {
		c.HoldTTLMillis = g.i64()
	}
	if on(13) {
		c.LockDelayMillis = g.i64()
	}
	c.Try = on(14)
	if on(15) {
		c.RequestID = g.str()
	}
	if on(16) {
		c.ACL = make([]ACLRule, int(g.byte())%4)
		for i := range c.ACL {
			c.ACL[i] = ACLRule{Identity: g.str(), Prefix: g.str(), Perms: Perm(g.byte())}
		}
	}
	if on(17) {
		c.ACLDefault = Perm(g.byte())
	}
	if on(18) {
		c.Limits = &Limits{MaxPathBytes: int(g.i64()), MaxDepth: int(g.i64()), MaxDataBytes: int(g.i64()), MaxMultiOps: int(g.i64()),
			MaxChildrenPage: int(g.i64()), MaxLockBatch: int(g.i64()), DefaultLockDelayMillis: g.i64(), MaxLockDelayMillis: g.i64(),
			LockHistoryMax: int(g.i64()), LockHistoryMaxAgeMillis: g.i64(), MaxLockRequestsPerSession: int(g.i64()),
			MinSessionTTLMillis: g.i64(), MaxSessionTTLMillis: g.i64()}
	}
	c.Withdrawn = on(19)
	if on(20) {
		c.Compares = make([]Compare, int(g.byte())%4)
		for i := range c.Compares {
			c.Compares[i] = Compare{Path: g.str(), Target: CmpTarget(g.byte()), Op: CmpOp(g.byte()), Number: g.i64()}
			if g.byte()&1 == 1 {
				c.Compares[i].Value = g.bytes()
			}
		}
	}
	if on(21) && depth < 3 {
		c.Else = make([]Command, int(g.byte())%4)
		for i := range c.Else {
			c.Else[i] = g.command(depth + 1)
		}
	}
	return c
}

// FuzzEntryCodec is the differential test of entrycodec.go against
// go-msgpack's reflection codec, the log format's definition: an Entry
// built from the input encodes to the same bytes, and the input itself,
// read as an encoded entry, decodes the same (both fail, or both give
// deep-equal entries).
func FuzzEntryCodec(f *testing.F) {
	hot, rare := entryCodecCases()
	for _, m := range []map[string]*Entry{hot, rare} {
		for name, e := range m {
			if !strings.Contains(name, "32") { // keep the corpus small
				f.Add(reflectEncode(f, e))
			}
		}
	}
	f.Add([]byte{0x80, 0xff, 0x01, 0x02, 0x03, 0xfa, 0x10, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecodeAgrees(t, b)
		g := entryGen{b: b}
		e := &Entry{Time: g.i64(), Cmd: g.command(0)}
		checkEntryCodec(t, e)
	})
}

func benchEntries() map[string]*Entry {
	set := Command{Op: OpSet, Path: "/latch-bench-0123456789ab/k00042", Data: make([]byte, 100), Version: AnyVersion,
		Session: 1_763_900_000, Identity: "bench-client"}
	return map[string]*Entry{
		"set": {Time: 1_763_900_000_123_456_789, Cmd: set},
		"lock": {Time: 1_763_900_000_123_456_789, Cmd: Command{Op: OpLockRequest, Path: "/latch-bench-0123456789ab/contended/l3",
			Session: 123456, Identity: "bench-client", RequestID: "r-1234", HoldTTLMillis: 30_000}},
		"multi4": {Time: 1_763_900_000_123_456_789, Cmd: Command{Op: OpMulti, Identity: "bench-client", Ops: []Command{set, set, set, set}}},
	}
}

// BenchmarkEncodeEntry compares the hand encoder (EncodeEntry) with the
// reflection encoder it replaced, pooled as it was.
func BenchmarkEncodeEntry(b *testing.B) {
	for _, name := range []string{"set", "lock", "multi4"} {
		e := benchEntries()[name]
		b.Run(name+"/hand", func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := EncodeEntry(e); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/reflect", func(b *testing.B) {
			buf := make([]byte, 0, 1024)
			enc := codec.NewEncoderBytes(&buf, entryHandle)
			b.ReportAllocs()
			for range b.N {
				out := buf[:0]
				enc.ResetBytes(&out)
				if err := enc.Encode(e); err != nil {
					b.Fatal(err)
				}
				_ = append([]byte(nil), out...)
			}
		})
	}
}

// BenchmarkDecodeEntry compares the fast decoder (DecodeEntry) with the
// reflection decoder, its fallback.
func BenchmarkDecodeEntry(b *testing.B) {
	for _, name := range []string{"set", "lock", "multi4"} {
		enc, err := EncodeEntry(benchEntries()[name])
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/hand", func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := DecodeEntry(enc); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/reflect", func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := decodeEntryReflect(enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestEntryCodecEveryField: a field added to Command (or to a type it
// carries) must be added to entrycodec.go's encoder, and its decoder,
// before this passes: with every field set, the hand encoding must still
// be the reflection encoding, and the fast decoder must take the command
// once the fields it leaves to the reflection decoder are cleared.
func TestEntryCodecEveryField(t *testing.T) {
	e := &Entry{}
	fieldfill.Value(reflect.ValueOf(e).Elem(), 0)
	checkEntryCodec(t, e)
	e.Cmd.ACL, e.Cmd.Limits = nil, nil
	e.Cmd.Ops[0].ACL, e.Cmd.Ops[0].Limits = nil, nil
	e.Cmd.Else[0].ACL, e.Cmd.Else[0].Limits = nil, nil
	if !checkEntryCodec(t, e) {
		t.Errorf("the fast decoder declines %+v: a field it does not know?", e.Cmd)
	}
}
