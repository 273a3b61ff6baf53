package session

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/latch-io/latch/namespace"
)

// FuzzMsgCodec checks the hand-written codec against go-msgpack's
// reflection codec, which defines the wire format: whatever the fast
// decoder accepts, the reflection path accepts with the same message; and
// every message the reflection path decodes is encoded by the fast
// encoder, where it does not decline, into the same bytes.
func FuzzMsgCodec(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		checkMsgCodec(t, body, new(Request), new(Request))
		checkMsgCodec(t, body, new(Response), new(Response))
	})
}

func checkMsgCodec[M any](t *testing.T, body []byte, fast, slow *M) {
	t.Helper()
	slowErr := decodeBodyReflect(body, slow)
	if fastOK := decodeFast(body, fast); fastOK {
		if slowErr != nil {
			t.Fatalf("%T %x: the fast decoder accepts what the reflection decoder refuses: %v", fast, body, slowErr)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%T %x: decoders differ:\nfast %+v\nslow %+v", fast, body, fast, slow)
		}
	} else if !reflect.DeepEqual(fast, new(M)) {
		t.Fatalf("%T %x: a declined decode left %+v", fast, body, fast)
	}
	if slowErr == nil {
		checkEncoding(t, slow)
	}
}

// checkEncoding compares the fast encoding of v, unless declined, with the
// reflection encoding.
func checkEncoding(t *testing.T, v any) {
	t.Helper()
	want, err := appendFrameReflect([]byte("prefix"), v)
	if err != nil {
		return
	}
	got, ok := appendFrameFast([]byte("prefix"), v)
	if ok && !bytes.Equal(got, want) {
		t.Fatalf("%+v: fast encoding\n%x\nreflection encoding\n%x", v, got, want)
	}
	if !ok && !bytes.Equal(got, []byte("prefix")) {
		t.Fatalf("a declined encoding left %x", got)
	}
}

// TestMsgCodecRandom encodes random messages of the fields the fast codec
// covers, integers at every width boundary, and checks the fast codec
// against reflection both ways.
func TestMsgCodecRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 5000; i++ {
		q, p := randomRequest(rng), randomResponse(rng)
		for _, v := range []any{q, p} {
			checkEncoding(t, v)
			frame, err := appendFrameReflect(nil, v)
			if err != nil {
				t.Fatal(err)
			}
			body := frame[frameHeaderLen:]
			switch v.(type) {
			case *Request:
				checkMsgCodec(t, body, new(Request), new(Request))
				if got := new(Request); !decodeFast(body, got) || !reflect.DeepEqual(got, v) {
					t.Fatalf("fast decode of %+v declined or differs: %+v", v, got)
				}
			case *Response:
				checkMsgCodec(t, body, new(Response), new(Response))
				if got := new(Response); !decodeFast(body, got) || !reflect.DeepEqual(got, v) {
					t.Fatalf("fast decode of %+v declined or differs: %+v", v, got)
				}
			}
		}
	}
}

// TestMsgCodecDeclines: messages with fields the fast codec leaves to
// reflection still travel, by reflection.
func TestMsgCodecDeclines(t *testing.T) {
	for _, v := range []any{fullRequest(), fullResponse(), &Request{Type: MsgKeepAlive, Sessions: []uint64{1}}, &Response{Names: []string{"a"}},
		&Request{Type: MsgTxn, Compares: []namespace.Compare{{Path: "/a", Target: namespace.CmpExists}}},
		&Request{Type: MsgTxn, Else: []Op{{Type: namespace.OpGet, Path: "/a"}}}, &Response{Succeeded: true, Rev: 3}} {
		if _, ok := appendFrameFast(nil, v); ok {
			t.Errorf("%+v: the fast encoder took a message with a field it does not cover", v)
		}
		checkEncoding(t, v)
	}
}

// randInt returns an integer near a msgpack width boundary, or zero.
func randInt(rng *rand.Rand) int64 {
	edges := []int64{0, 1, 31, 32, -32, -33, 127, 128, -128, -129, 255, 256, 32767, 32768, -32768, -32769,
		65535, 65536, math.MaxInt32, math.MaxInt32 + 1, math.MinInt32, math.MinInt32 - 1, math.MaxUint32, math.MaxUint32 + 1,
		math.MaxInt64, math.MinInt64}
	switch rng.IntN(3) {
	case 0:
		return 0
	case 1: // anywhere in a random width, either sign
		v := rng.Int64() >> rng.IntN(64)
		if rng.IntN(2) == 0 {
			v = -v
		}
		return v
	}
	return edges[rng.IntN(len(edges))] + int64(rng.IntN(3)) - 1
}

func randUint(rng *rand.Rand) uint64 {
	if rng.IntN(8) == 0 {
		return math.MaxUint64 - uint64(rng.IntN(2))
	}
	return uint64(randInt(rng))
}

func randStr(rng *rand.Rand) string {
	n := []int{0, 0, 1, 31, 32, 255, 256, 65535, 65536}[rng.IntN(9)]
	if n > 256 && rng.IntN(50) != 0 {
		n = 3 // long strings, rarely: they are slow to encode by reflection
	}
	return string(bytes.Repeat([]byte{'a' + byte(rng.IntN(26))}, n))
}

func randBytes(rng *rand.Rand) []byte {
	if s := randStr(rng); s != "" {
		return []byte(s)
	}
	return nil
}

func randomRequest(rng *rand.Rand) *Request {
	return &Request{
		Type: MsgType(randUint(rng)), Call: randUint(rng), Session: randUint(rng), Stale: rng.IntN(2) == 0,
		ProtocolVersion: uint32(randUint(rng)), ClientName: randStr(rng),
		Secret: randBytes(rng), TTLMillis: randInt(rng),
		Path: randStr(rng), Data: randBytes(rng), Flags: namespace.CreateFlags(randUint(rng)), Version: randInt(rng),
		Recursive: rng.IntN(2) == 0, After: randStr(rng), Limit: int32(randInt(rng)),
		Kind: WatchKind(randUint(rng)), FromRev: randUint(rng), OneShot: rng.IntN(2) == 0,
		Mode: LockMode(randUint(rng)), TimeoutMillis: randInt(rng), HoldTTLMillis: randInt(rng), LockDelayMillis: randInt(rng),
		Node: randStr(rng), Try: rng.IntN(2) == 0, RequestID: randStr(rng), MinRev: randUint(rng), Cache: rng.IntN(2) == 0,
	}
}

func randomResponse(rng *rand.Rand) *Response {
	p := &Response{
		Call: randUint(rng), Code: Code(randUint(rng)), Message: randStr(rng), Leader: randStr(rng),
		ProtocolVersion: uint32(randUint(rng)), ServerID: randStr(rng), Features: Feature(randUint(rng)),
		Session: randUint(rng), Secret: randBytes(rng), TTLMillis: randInt(rng),
		Path: randStr(rng), Data: randBytes(rng), Exists: rng.IntN(2) == 0, More: rng.IntN(2) == 0,
		Rev: randUint(rng), Lock: LockPhase(randUint(rng)), Node: randStr(rng), Next: rng.IntN(2) == 0, Token: randUint(rng), Valid: rng.IntN(2) == 0,
		Cached: rng.IntN(2) == 0,
	}
	if rng.IntN(2) == 0 {
		p.Stat = namespace.Stat{CreateRev: randUint(rng), ModRev: randUint(rng), Ctime: randInt(rng), Mtime: randInt(rng),
			Version: randInt(rng), CVersion: randInt(rng), EphemeralOwner: randUint(rng), NumChildren: randInt(rng), DataLength: int32(randInt(rng))}
	}
	return p
}

// TestMsgCodecEveryField sets each field of Request and Response alone:
// the fast encoder must write it as reflection does or decline the
// message, so a field added to either struct fails here until
// msgcodec.go writes it (or declines it).
func TestMsgCodecEveryField(t *testing.T) {
	for _, v := range []any{&Request{}, &Response{}} {
		typ := reflect.TypeOf(v).Elem()
		for i := range typ.NumField() {
			m := reflect.New(typ)
			fillField(m.Elem().Field(i))
			checkEncoding(t, m.Interface())
			frame, err := appendFrameReflect(nil, m.Interface())
			if err != nil {
				t.Fatal(err)
			}
			if _, fast := appendFrameFast(nil, m.Interface()); fast {
				got := reflect.New(typ)
				if !decodeFast(frame[frameHeaderLen:], got.Interface()) || !reflect.DeepEqual(got.Interface(), m.Interface()) {
					t.Errorf("%s.%s: the fast encoder writes it, the fast decoder does not read it back", typ.Name(), typ.Field(i).Name)
				}
			}
		}
	}
}

// fillField sets v, and every field reachable from it, to a non-zero
// value (a slice gets one element, a pointer a value, a map one entry).
func fillField(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			fillField(v.Field(i))
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillField(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillField(v.Index(0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fillField(k)
		fillField(e)
		v.SetMapIndex(k, e)
	case reflect.String:
		v.SetString("s")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(-300)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(200)
	default:
		panic("fillField: add " + v.Kind().String())
	}
}

// BenchmarkMsgCodec compares the hand-written codec with reflection on
// the messages of a set and of a lock cycle.
func BenchmarkMsgCodec(b *testing.B) {
	msgs := []struct {
		name string
		v    any
	}{
		{"set", &Request{Type: MsgSet, Call: 123456, Session: 1 << 40, Path: "/bench/set/node-17", Data: bytes.Repeat([]byte("x"), 100), Version: namespace.AnyVersion}},
		{"set-answer", &Response{Call: 123456, Rev: 9876543, Stat: namespace.Stat{CreateRev: 1000, ModRev: 9876543, Ctime: 1.7e18, Mtime: 1.7e18 + 1e9, Version: 17, DataLength: 100}}},
		{"lock", &Request{Type: MsgLock, Session: 1 << 40, Path: "/bench/lock/l3", RequestID: "r-12345"}},
		{"lock-granted", &Response{Lock: LockGranted, Node: "/bench/lock/l3/lock-0000012345", Token: 12345, Rev: 9876543}},
	}
	for _, m := range msgs {
		frame, err := appendFrameReflect(nil, m.v)
		if err != nil {
			b.Fatal(err)
		}
		body := frame[frameHeaderLen:]
		fresh := func() any { return reflect.New(reflect.TypeOf(m.v).Elem()).Interface() }
		for _, c := range []struct {
			name   string
			encode func([]byte, any) ([]byte, error)
			decode func([]byte, any) error
		}{{"reflect", appendFrameReflect, decodeBodyReflect}, {"fast", appendFrame, decodeBody}} {
			b.Run(m.name+"/encode/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				var buf []byte
				for b.Loop() {
					buf, _ = c.encode(buf[:0], m.v)
				}
			})
			b.Run(m.name+"/decode/"+c.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := c.decode(body, fresh()); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
