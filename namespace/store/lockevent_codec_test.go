package store

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/namespace/internal/fieldfill"
)

// TestLockEventCodec: appendLockEvent writes what EntryHandle()'s
// reflection encoder writes (the stored format, part of the state hash),
// and lockEventSize is its length, for events with every field at msgpack
// width boundaries.
func TestLockEventCodec(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ints := []int64{0, 1, -1, 31, -32, -33, 127, 128, -128, -129, 255, 256, 32767, 32768, -32769, 65535, 65536,
		math.MaxInt32, math.MaxInt32 + 1, math.MinInt32 - 1, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64, math.MinInt64}
	num := func() int64 {
		if rng.IntN(2) == 0 {
			return rng.Int64() >> rng.IntN(64) * int64(1-2*rng.IntN(2))
		}
		return ints[rng.IntN(len(ints))]
	}
	unum := func() uint64 {
		if rng.IntN(8) == 0 {
			return math.MaxUint64
		}
		return uint64(num())
	}
	str := func() string { return strings.Repeat("x", []int{0, 1, 31, 32, 255, 256, 65536}[rng.IntN(7)]) }
	for i := 0; i < 3000; i++ {
		ev := &namespace.LockEvent{
			Seq: unum(), Rev: unum(), Event: str(), Path: str(), Node: str(), Mode: namespace.LockMode(unum()),
			Token: unum(), Session: unum(), Identity: str(), By: str(), Time: num(), GrantTime: num(),
		}
		var want []byte
		if err := codec.NewEncoderBytes(&want, namespace.EntryHandle()).Encode(ev); err != nil {
			t.Fatal(err)
		}
		got := appendLockEvent([]byte("x"), ev)
		if !bytes.Equal(got[1:], want) {
			t.Fatalf("%+v:\n got %x\nwant %x", ev, got[1:], want)
		}
		if n := lockEventSize(ev); n != len(want) {
			t.Fatalf("%+v: lockEventSize %d, encoding %d bytes", ev, n, len(want))
		}
	}
}

// TestLockEventCodecEveryField: a field added to LockEvent must be added
// to appendLockEvent before this passes.
func TestLockEventCodecEveryField(t *testing.T) {
	ev := &namespace.LockEvent{}
	fieldfill.Value(reflect.ValueOf(ev).Elem(), 0)
	var want []byte
	if err := codec.NewEncoderBytes(&want, namespace.EntryHandle()).Encode(ev); err != nil {
		t.Fatal(err)
	}
	if got := appendLockEvent(nil, ev); !bytes.Equal(got, want) {
		t.Fatalf("with every field set:\n got %x\nwant %x", got, want)
	}
}
