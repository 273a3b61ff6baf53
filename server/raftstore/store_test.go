package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func openTest(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func testLog(i uint64) *raft.Log {
	return &raft.Log{
		Index:      i,
		Term:       i/10 + 1,
		Type:       raft.LogCommand,
		Data:       []byte(fmt.Sprintf("data-%d", i)),
		Extensions: []byte{byte(i)},
		AppendedAt: time.Unix(1700000000, int64(i)),
	}
}

func storeRange(t testing.TB, s *Store, lo, hi uint64) {
	t.Helper()
	var logs []*raft.Log
	for i := lo; i <= hi; i++ {
		logs = append(logs, testLog(i))
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatalf("StoreLogs(%d..%d): %v", lo, hi, err)
	}
}

func assertBounds(t *testing.T, s *Store, first, last uint64) {
	t.Helper()
	f, err := s.FirstIndex()
	if err != nil || f != first {
		t.Fatalf("FirstIndex = %d, %v; want %d", f, err, first)
	}
	l, err := s.LastIndex()
	if err != nil || l != last {
		t.Fatalf("LastIndex = %d, %v; want %d", l, err, last)
	}
}

func assertLog(t *testing.T, s *Store, i uint64) {
	t.Helper()
	var got raft.Log
	if err := s.GetLog(i, &got); err != nil {
		t.Fatalf("GetLog(%d): %v", i, err)
	}
	want := testLog(i)
	if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type ||
		!bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Extensions, want.Extensions) ||
		!got.AppendedAt.Equal(want.AppendedAt) {
		t.Fatalf("GetLog(%d) = %+v, want %+v", i, got, *want)
	}
}

func assertMissing(t *testing.T, s *Store, i uint64) {
	t.Helper()
	var got raft.Log
	if err := s.GetLog(i, &got); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog(%d) err = %v, want raft.ErrLogNotFound", i, err)
	}
}

func TestLogStore(t *testing.T) {
	s := openTest(t, t.TempDir())
	assertBounds(t, s, 0, 0)
	assertMissing(t, s, 1)

	storeRange(t, s, 1, 100)
	assertBounds(t, s, 1, 100)
	for i := uint64(1); i <= 100; i++ {
		assertLog(t, s, i)
	}
	assertMissing(t, s, 101)

	if err := s.StoreLog(testLog(101)); err != nil {
		t.Fatal(err)
	}
	assertBounds(t, s, 1, 101)

	// Compaction removes a prefix.
	if err := s.DeleteRange(1, 40); err != nil {
		t.Fatal(err)
	}
	assertBounds(t, s, 41, 101)
	assertMissing(t, s, 40)
	assertLog(t, s, 41)

	// Conflict resolution removes a suffix, then rewrites it.
	if err := s.DeleteRange(90, 101); err != nil {
		t.Fatal(err)
	}
	assertBounds(t, s, 41, 89)
	assertMissing(t, s, 90)
	storeRange(t, s, 90, 95)
	assertBounds(t, s, 41, 95)
	assertLog(t, s, 95)

	// A range past the end and an inverted range change nothing.
	if err := s.DeleteRange(200, 300); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(60, 50); err != nil {
		t.Fatal(err)
	}
	assertBounds(t, s, 41, 95)

	// Deleting everything empties the log; a later store after a gap sets both bounds.
	if err := s.DeleteRange(0, 1000); err != nil {
		t.Fatal(err)
	}
	assertBounds(t, s, 0, 0)
	storeRange(t, s, 500, 510)
	assertBounds(t, s, 500, 510)
}

func TestLogZeroValues(t *testing.T) {
	s := openTest(t, t.TempDir())
	in := &raft.Log{Index: 7, Term: 3, Type: raft.LogNoop}
	if err := s.StoreLog(in); err != nil {
		t.Fatal(err)
	}
	var got raft.Log
	got.Data = []byte("stale")
	got.AppendedAt = time.Now()
	if err := s.GetLog(7, &got); err != nil {
		t.Fatal(err)
	}
	if got.Index != 7 || got.Term != 3 || got.Type != raft.LogNoop || got.Data != nil ||
		got.Extensions != nil || !got.AppendedAt.IsZero() {
		t.Fatalf("got %+v", got)
	}
}

func TestStoreLogsLargerThanOneTxn(t *testing.T) {
	s := openTest(t, t.TempDir())
	// 300 x 64 KiB is well past badger's per-transaction limit with 16 MiB memtables.
	payload := bytes.Repeat([]byte("x"), 64<<10)
	var logs []*raft.Log
	for i := uint64(1); i <= 300; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Data: payload})
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	assertBounds(t, s, 1, 300)
	var got raft.Log
	if err := s.GetLog(300, &got); err != nil || !bytes.Equal(got.Data, payload) {
		t.Fatalf("GetLog(300): %v, %d bytes", err, len(got.Data))
	}
	if err := s.DeleteRange(1, 300); err != nil {
		t.Fatal(err)
	}
	assertBounds(t, s, 0, 0)
}

func TestStableStore(t *testing.T) {
	s := openTest(t, t.TempDir())
	if _, err := s.Get([]byte("missing")); !errors.Is(err, ErrKeyNotFound) || err.Error() != "not found" {
		t.Fatalf("Get missing err = %v, want exactly \"not found\"", err)
	}
	if v, err := s.GetUint64([]byte("missing")); err != nil || v != 0 {
		t.Fatalf("GetUint64 missing = %d, %v; want 0, nil", v, err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("node-2")); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "node-2" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 1<<40+5); err != nil {
		t.Fatal(err)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 1<<40+5 {
		t.Fatalf("GetUint64 = %d, %v", v, err)
	}
	// Stable keys never show up as log entries and vice versa.
	assertBounds(t, s, 0, 0)
	storeRange(t, s, 1, 3)
	if _, err := s.Get([]byte{0, 0, 0, 0, 0, 0, 0, 1}); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("log key visible through Get: %v", err)
	}
}

func TestReopenPersists(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	storeRange(t, s, 1, 50)
	if err := s.DeleteRange(1, 9); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 9); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLog(testLog(51)); !errors.Is(err, ErrClosed) {
		t.Fatalf("StoreLog after Close = %v, want ErrClosed", err)
	}

	s = openTest(t, dir)
	assertBounds(t, s, 10, 50)
	assertMissing(t, s, 9)
	for i := uint64(10); i <= 50; i++ {
		assertLog(t, s, i)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 9 {
		t.Fatalf("CurrentTerm = %d, %v", v, err)
	}
	if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "a" {
		t.Fatalf("LastVoteCand = %q, %v", v, err)
	}
}

func TestDecodeCorrupt(t *testing.T) {
	good := encodeLog(nil, testLog(3))
	for n := 0; n < len(good); n++ {
		var l raft.Log
		if err := decodeLog(good[:n], &l); !errors.Is(err, ErrCorruptLog) {
			t.Fatalf("decode of %d/%d bytes: err = %v, want ErrCorruptLog", n, len(good), err)
		}
	}
	if err := decodeLog(append(good, 0), &raft.Log{}); !errors.Is(err, ErrCorruptLog) {
		t.Fatalf("trailing byte: err = %v", err)
	}
	bad := append([]byte{9}, good[1:]...)
	if err := decodeLog(bad, &raft.Log{}); !errors.Is(err, ErrCorruptLog) {
		t.Fatalf("bad version: err = %v", err)
	}
}

func FuzzDecodeLog(f *testing.F) {
	f.Add(encodeLog(nil, testLog(3)))
	f.Add([]byte{1, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var l raft.Log
		if err := decodeLog(b, &l); err != nil {
			return
		}
		again := encodeLog(nil, &l)
		var l2 raft.Log
		if err := decodeLog(again, &l2); err != nil || l2.Index != l.Index || !bytes.Equal(l2.Data, l.Data) {
			t.Fatalf("round trip of a decodable record failed: %v", err)
		}
	})
}

// BenchmarkStoreLogs measures a fsynced append of a batch of 100-byte
// entries, which is what raft does for every batch it replicates, on the
// badger Store and on the WAL members use (doc.go has the figures).
func BenchmarkStoreLogs(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) raft.LogStore
	}{
		{"badger", func(b *testing.B) raft.LogStore { return openTest(b, b.TempDir()) }},
		{"wal", func(b *testing.B) raft.LogStore { return openTestWAL(b, b.TempDir()) }},
	}
	for _, st := range stores {
		for _, batch := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("%s/batch=%d", st.name, batch), func(b *testing.B) {
				s := st.open(b)
				data := bytes.Repeat([]byte("d"), 100)
				logs := make([]*raft.Log, batch)
				next := uint64(1)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					for j := range logs {
						logs[j] = &raft.Log{Index: next, Term: 1, Data: data, AppendedAt: time.Now()}
						next++
					}
					if err := s.StoreLogs(logs); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "entries/s")
			})
		}
	}
}
