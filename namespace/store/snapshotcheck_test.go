package store

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/latch-io/latch/namespace"
)

// snapRecord is one key and value of a snapshot, for editing one.
type snapRecord struct{ k, v []byte }

// parseSnapshotRecords splits a snapshot into its records.
func parseSnapshotRecords(t *testing.T, b []byte) []snapRecord {
	t.Helper()
	var recs []snapRecord
	in := &crcReader{r: bufio.NewReader(bytes.NewReader(b[len(snapshotMagic):])), crc: crc32.New(crcTable)}
	in.crc.Write([]byte(snapshotMagic))
	if err := scanSnapshot(in, in.crc, func(k, v []byte) error {
		recs = append(recs, snapRecord{k, v})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return recs
}

// encodeSnapshotRecords writes recs as a snapshot with a valid CRC, as an
// editor who re-checksums the file would.
func encodeSnapshotRecords(recs []snapRecord) []byte {
	b := []byte(snapshotMagic)
	for _, r := range recs {
		b = binary.AppendUvarint(b, uint64(len(r.k)))
		b = append(b, r.k...)
		b = binary.AppendUvarint(b, uint64(len(r.v)))
		b = append(b, r.v...)
	}
	b = append(b, 0)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

// lockedStore has two sessions, a lock held by the first on /a and a
// request of the second queued behind it.
func lockedStore(t *testing.T) *Store {
	s := openTestStore(t)
	for i, c := range []*namespace.Command{
		{Op: namespace.OpSessionOpen, TTLMillis: 10_000, Secret: []byte("s1")},
		{Op: namespace.OpSessionOpen, TTLMillis: 10_000, Secret: []byte("s2")},
		{Op: namespace.OpLockRequest, Path: "/a", Session: 1},
		{Op: namespace.OpLockRequest, Path: "/a", Session: 2},
		{Op: namespace.OpCreate, Path: "/data", Data: []byte("payload-payload-payload")},
	} {
		if r := s.Apply(uint64(i+1), 1_000_000, c); r.Err != nil {
			t.Fatalf("%s: %v", c.Op, r.Err)
		}
	}
	return s
}

// TestCheckSnapshotRefusesEdits: each edit the hostile tester made to a
// backup (and re-checksummed) is refused by CheckSnapshot, with an error
// naming what is wrong, and the sound snapshot passes.
func TestCheckSnapshotRefusesEdits(t *testing.T) {
	good := snapshotBytes(t, lockedStore(t))
	sum, err := CheckSnapshot(bytes.NewReader(good))
	if err != nil {
		t.Fatalf("CheckSnapshot of a sound snapshot: %v", err)
	}
	if sum.Index != 5 || sum.Sessions != 2 || sum.Locks != 2 {
		t.Fatalf("summary %+v, want index 5, 2 sessions, 2 locks", sum)
	}
	recs := parseSnapshotRecords(t, good)
	without := func(drop func(r snapRecord) bool) []byte {
		var out []snapRecord
		for _, r := range recs {
			if !drop(r) {
				out = append(out, r)
			}
		}
		return encodeSnapshotRecords(out)
	}
	duplicate := func() []byte {
		// The second session's request record made a copy of the first's:
		// two requests on one node.
		var first []byte
		out := make([]snapRecord, len(recs))
		for i, r := range recs {
			if bytes.Equal(r.k, lockKey(3)) {
				first = r.v
			}
			if bytes.Equal(r.k, lockKey(4)) {
				r.v = first
			}
			out[i] = r
		}
		return encodeSnapshotRecords(out)
	}
	flipped := bytes.Clone(good)
	i := bytes.Index(flipped, []byte("payload-payload"))
	flipped[i+3] ^= 0x01

	for _, tc := range []struct {
		name string
		snap []byte
		want string
	}{
		{"no applied index", without(func(r snapRecord) bool { return bytes.Equal(r.k, metaApplied) }), "metadata key"},
		{"no clock", without(func(r snapRecord) bool { return bytes.Equal(r.k, metaClock) }), "metadata key"},
		{"sessions removed", without(func(r snapRecord) bool { return r.k[0] == spaceSession }), "does not hold"},
		{"duplicate request", duplicate(), "are both on node"},
		{"lock node removed", without(func(r snapRecord) bool {
			return r.k[0] == spaceNode && strings.HasPrefix(pathOfNodeKey(r.k), "/a/lock-")
		}), "is missing"},
		{"flipped byte", flipped, "checksum"},
		{"out of order", encodeSnapshotRecords(append([]snapRecord{recs[len(recs)-1]}, recs...)), "out of order"},
		{"trailing data", append(bytes.Clone(good), 0), "after the checksum"},
		{"truncated", good[:len(good)-3], "checksum"},
		{"not a snapshot", []byte("hello"), "not a namespace snapshot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CheckSnapshot(bytes.NewReader(tc.snap))
			if !errors.Is(err, namespace.ErrBadSnapshot) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckSnapshot = %v, want ErrBadSnapshot saying %q", err, tc.want)
			}
		})
	}
}

// TestCheckSnapshotAcceptsEndingSessions: a session that ended with more
// nodes than one command deletes has no record while its remaining lock
// requests wait for the next ticks; a snapshot taken then is sound.
func TestCheckSnapshotAcceptsEndingSessions(t *testing.T) {
	s := openTestStore(t)
	lim := namespace.DefaultLimits()
	lim.MaxLockBatch = 1
	cmds := []*namespace.Command{
		{Op: namespace.OpSetLimits, Limits: &lim, Version: namespace.AnyVersion},
		{Op: namespace.OpSessionOpen, TTLMillis: 10_000, Secret: []byte("s")},
	}
	for _, p := range []string{"/a", "/b", "/c"} {
		cmds = append(cmds, &namespace.Command{Op: namespace.OpLockRequest, Path: p, Session: 2})
	}
	cmds = append(cmds, &namespace.Command{Op: namespace.OpSessionClose, Session: 2})
	for i, c := range cmds {
		if r := s.Apply(uint64(i+1), 1_000_000, c); r.Err != nil {
			t.Fatalf("%s: %v", c.Op, r.Err)
		}
	}
	snap := snapshotBytes(t, s)
	if !bytes.Contains(snap, endingKey(2)) {
		t.Fatal("the session is not ending with nodes left: the test does not test")
	}
	if _, err := CheckSnapshot(bytes.NewReader(snap)); err != nil {
		t.Fatalf("CheckSnapshot of a store with an ending session: %v", err)
	}
}

// FuzzCheckSnapshot: no input makes the checker panic, and whatever it
// accepts a store restores.
func FuzzCheckSnapshot(f *testing.F) {
	f.Add([]byte(snapshotMagic))
	f.Add(encodeSnapshotRecords([]snapRecord{{metaApplied, make([]byte, 8)}}))
	f.Add(encodeSnapshotRecords([]snapRecord{{lockKey(1), []byte{1, 0, 1, 2, '/', 'a', 0, 0}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = CheckSnapshot(bytes.NewReader(b))
	})
}
