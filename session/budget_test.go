package session

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// allocated returns the bytes allocated while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// allocBound is what the fuzz target and the tests allow decoding a body of
// n bytes to allocate: a small multiple of the frame (the budget, plus the
// decoder's slice growth and its pooled state).
func allocBound(n int) uint64 { return 256<<10 + 4*uint64(decodeBudget(n)) }

// nilOps is the amplification attack of the report: a Multi whose Ops
// array holds count nils (one byte each, one zeroed Op each when decoded).
func nilOps(count int) []byte {
	b := []byte{0x82, 0xa1, 't', byte(MsgMulti), 0xa3, 'o', 'p', 's', 0xdd}
	b = binary.BigEndian.AppendUint32(b, uint32(count))
	return append(b, bytes.Repeat([]byte{0xc0}, count)...)
}

func TestDecodeWorkBoundedByFrame(t *testing.T) {
	cases := map[string][]byte{
		// 1.1 MB of nil ops: 373 MB decoded before the 128-op check.
		"nil ops":     nilOps(1_100_000),
		"empty names": append([]byte{0x81, 0xa2, 'n', 's', 0xdd, 0, 0x10, 0, 0}, bytes.Repeat([]byte{0xa0}, 1<<20)...),
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			var err error
			n := allocated(func() {
				if name == "empty names" {
					_, err = DecodeResponse(body)
				} else {
					_, err = DecodeRequest(body)
				}
			})
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("decode of %d bytes: %v, want ErrMalformed", len(body), err)
			}
			if n > allocBound(len(body)) {
				t.Fatalf("decoding %d bytes allocated %d, bound %d", len(body), n, allocBound(len(body)))
			}
		})
	}
}

// TestDecodeBudgetFitsRealMessages: the largest legitimate answers (a page
// of one-character names, a full keepalive batch of small ids) decode.
func TestDecodeBudgetFitsRealMessages(t *testing.T) {
	names := make([]string, 1000)
	for i := range names {
		names[i] = string(rune('a' + i%26))
	}
	ids := make([]uint64, MaxKeepAliveBatch-1)
	for i := range ids {
		ids[i] = uint64(i % 100)
	}
	ops := make([]Op, 128)
	for _, v := range []any{
		&Response{Names: names},
		&Request{Type: MsgKeepAlive, Session: 1, Sessions: ids},
		&Request{Type: MsgMulti, Ops: ops},
		fullRequest(), fullResponse(),
	} {
		frame, err := appendFrame(nil, v)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkDecodeCost(frame[frameHeaderLen:], v); err != nil {
			t.Errorf("%T refused: %v", v, err)
		}
	}
}

// TestDecodeRejectsWrappedIntegers: the decoder would store 2^64-1 into an
// int64 as -1 (namespace.AnyVersion, "any version"); the scan refuses it,
// and every other integer that does not fit its field.
func TestDecodeRejectsWrappedIntegers(t *testing.T) {
	enc := func(m map[string]any) []byte {
		var b []byte
		if err := codec.NewEncoderBytes(&b, handle).Encode(m); err != nil {
			t.Fatal(err)
		}
		return b
	}
	bad := []map[string]any{
		{"t": uint8(MsgSet), "p": "/a", "v": uint64(math.MaxUint64)},
		{"t": uint8(MsgSet), "p": "/a", "v": uint64(math.MaxInt64) + 1},
		{"t": uint8(MsgChildren), "p": "/a", "lim": int64(math.MaxInt32) + 1},
		{"t": 300},
		{"t": uint8(MsgGet), "s": -1},
	}
	for _, m := range bad {
		if _, err := DecodeRequest(enc(m)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%v decoded: %v", m, err)
		}
	}
	req, err := DecodeRequest(enc(map[string]any{"t": uint8(MsgSet), "p": "/a", "v": int64(-1)}))
	if err != nil || req.Version != -1 {
		t.Fatalf("explicit -1 (any version): %+v %v", req, err)
	}
	req, err = DecodeRequest(enc(map[string]any{"t": uint8(MsgSet), "p": "/a", "v": uint64(math.MaxInt64)}))
	if err != nil || req.Version != math.MaxInt64 {
		t.Fatalf("max int64: %+v %v", req, err)
	}
}

// FuzzDecodeAlloc: whatever the body, decoding allocates within a small
// multiple of its size.
func FuzzDecodeAlloc(f *testing.F) {
	f.Add(nilOps(4096))
	f.Add(append([]byte{0x81, 0xa2, 'n', 's', 0xdc, 0x10, 0}, bytes.Repeat([]byte{0xa0}, 4096)...))
	for _, seeds := range fuzzSeeds() {
		for _, s := range seeds {
			f.Add(s)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if n := allocated(func() { DecodeRequest(body) }); n > allocBound(len(body)) {
			t.Fatalf("request of %d bytes allocated %d, bound %d", len(body), n, allocBound(len(body)))
		}
		if n := allocated(func() { DecodeResponse(body) }); n > allocBound(len(body)) {
			t.Fatalf("response of %d bytes allocated %d, bound %d", len(body), n, allocBound(len(body)))
		}
	})
}
