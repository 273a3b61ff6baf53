package namespace

import (
	"bytes"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

func fullEntry() *Entry {
	return &Entry{Time: 1_700_000_000_123_456_789, Cmd: Command{
		Op: OpMulti,
		Ops: []Command{
			{Op: OpCreate, Path: "/a/q-", Data: []byte("x\x00y"), Flags: FlagEphemeral | FlagSequential, Version: AnyVersion, Session: 7},
			{Op: OpSet, Path: "/b", Data: []byte{}, Version: 0},
			{Op: OpCheck, Path: "/c", Version: 3},
		},
	}}
}

func TestEntryRoundTrip(t *testing.T) {
	entries := []*Entry{
		fullEntry(),
		{Time: -1, Cmd: Command{Op: OpNoop}},
		{Time: 5, Cmd: Command{Op: OpSessionOpen, Secret: []byte{0, 1, 2, 255}, TTLMillis: 10_000, Identity: "CN=alice"}},
		{Time: 6, Cmd: Command{Op: OpSessionExpire, Sessions: []uint64{1, 1 << 63, 42}}},
		{Time: 7, Cmd: Command{Op: OpSetMember, Member: &Member{ID: "n1", RaftAddr: "a:1", ClientAddr: "b:2", HTTPAddr: "c:3"}}},
		{Time: 8, Cmd: Command{Op: OpDelete, Path: "/x", Version: AnyVersion}},
	}
	for _, e := range entries {
		b, err := EncodeEntry(e)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeEntry(b)
		if err != nil {
			t.Fatalf("decode %+v: %v", e, err)
		}
		normalize(&got.Cmd)
		want := *e
		normalize(&want.Cmd)
		if !reflect.DeepEqual(got, &want) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, &want)
		}
	}
}

// normalize maps empty slices to nil: omitempty cannot tell them apart.
func normalize(c *Command) {
	if len(c.Data) == 0 {
		c.Data = nil
	}
	if len(c.Secret) == 0 {
		c.Secret = nil
	}
	for i := range c.Ops {
		normalize(&c.Ops[i])
	}
}

func TestEncodeIsDeterministic(t *testing.T) {
	a, _ := EncodeEntry(fullEntry())
	for range 20 {
		b, _ := EncodeEntry(fullEntry())
		if !bytes.Equal(a, b) {
			t.Fatal("encoding the same entry twice gave different bytes")
		}
	}
}

func TestDecodeEntryGarbage(t *testing.T) {
	good, _ := EncodeEntry(fullEntry())
	deep := bytes.Repeat([]byte{0x91}, 100_000) // arrays nested 100k deep
	cases := map[string][]byte{
		"empty":      nil,
		"truncated":  good[:len(good)/2],
		"not a map":  {0xc3},
		"wrong type": {0x81, 0xa1, 'c', 0x81, 0xa1, 'o', 0xa3, 'x', 'y', 'z'},
		"trailing":   append(bytes.Clone(good), 0xc0),
		"unknown":    {0x82, 0xa1, 't', 0x01, 0xa1, 'z', 0x01},
		"huge array": {0x81, 0xa2, 's', 's', 0xdd, 0xff, 0xff, 0xff, 0xff},
		"huge str":   {0x81, 0xa1, 'p', 0xdb, 0x7f, 0xff, 0xff, 0xff},
		"deep":       append([]byte{0x81, 0xa1, 'c', 0x81, 0xa3, 'o', 'p', 's'}, deep...),
		"deep ops":   bytes.Repeat([]byte{0x81, 0xa1, 'c', 0x81, 0xa3, 'o', 'p', 's', 0x91}, 1000),
	}
	for name, b := range cases {
		if _, err := DecodeEntry(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: DecodeEntry = %v, want ErrMalformed", name, err)
		}
	}
}

// must give exactly the bytes a fresh reflection encoder gives.
// TestEntryCodecReuse: the reflection decoders (the fallback) come from a
// pool, so each call must start clean whatever the one before did (garbage
// that failed half way, a large entry), on any goroutine, and EncodeEntry
func TestEntryCodecReuse(t *testing.T) {
	fresh := func(e *Entry) []byte {
		var b []byte
		if err := codec.NewEncoderBytes(&b, entryHandle).Encode(e); err != nil {
			t.Fatal(err)
		}
		return b
	}
	newEntries := func() []*Entry {
		return []*Entry{
			fullEntry(),
			{Time: 3, Cmd: Command{Op: OpCreate, Path: "/big", Data: bytes.Repeat([]byte("d"), 100_000)}},
			{Time: 4, Cmd: Command{Op: OpLockRequest, Path: "/l", Session: 9, RequestID: "r1"}},
		}
	}
	entries, wants := newEntries(), newEntries() // wants normalized, before the goroutines share them
	for _, w := range wants {
		normalize(&w.Cmd)
	}
	garbage := [][]byte{{0x81, 0xa1, 'c', 0x81, 0xa1, 'o', 0xa3, 'x', 'y', 'z'}, fresh(fullEntry())[:20], {0xc3}}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 300 {
				e, want := entries[(g+i)%len(entries)], wants[(g+i)%len(entries)]
				b, err := EncodeEntry(e)
				if err != nil {
					t.Error(err)
					return
				}
				if want := fresh(e); !bytes.Equal(b, want) {
					t.Errorf("pooled encoder gave %x, a fresh one %x", b, want)
					return
				}
				if _, err := DecodeEntry(garbage[i%len(garbage)]); !errors.Is(err, ErrMalformed) {
					t.Errorf("garbage decoded: %v", err)
					return
				}
				got, err := DecodeEntry(b)
				if err != nil {
					t.Errorf("decode after garbage: %v", err)
					return
				}
				normalize(&got.Cmd)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}
