package store

import (
	"errors"
	"testing"

	"github.com/latch-io/latch/namespace"
)

// FuzzDecodeEntry: every input either fails with ErrMalformed or decodes
// to a command the store applies without panicking.
func FuzzDecodeEntry(f *testing.F) {
	good, _ := namespace.EncodeEntry(seedEntry())
	f.Add(good)
	open, _ := namespace.EncodeEntry(&namespace.Entry{Time: 5, Cmd: namespace.Command{Op: namespace.OpSessionOpen, Secret: []byte("s"), TTLMillis: 1000}})
	f.Add(open)
	f.Add([]byte{})
	f.Add([]byte{0x81, 0xa1, 'c', 0x81, 0xa3, 'o', 'p', 's', 0x91, 0x91})
	// One store for the whole run: opening badger per input would dominate.
	s, err := Open(Config{InMemory: true})
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := namespace.DecodeEntry(b)
		if err != nil {
			if !errors.Is(err, namespace.ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		// Whatever decodes must apply without panicking.
		s.Apply(s.AppliedIndex()+1, e.Time, &e.Cmd)
	})
}

// seedEntry is a multi with one op of each kind, to start the fuzzer on
// (namespace's fullEntry).
func seedEntry() *namespace.Entry {
	return &namespace.Entry{Time: 1_700_000_000_123_456_789, Cmd: namespace.Command{
		Op: namespace.OpMulti,
		Ops: []namespace.Command{
			{Op: namespace.OpCreate, Path: "/a/q-", Data: []byte("x\x00y"), Flags: namespace.FlagEphemeral | namespace.FlagSequential, Version: namespace.AnyVersion, Session: 7},
			{Op: namespace.OpSet, Path: "/b", Data: []byte{}, Version: 0},
			{Op: namespace.OpCheck, Path: "/c", Version: 3},
		},
	}}
}
