package store

import (
	"fmt"
	"io"
	"testing"

	"github.com/latch-io/latch/namespace"
)

// BenchmarkApplyCreate measures the FSM's throughput path: ApplyBatch of 64
// creates (raft's default MaxAppendEntries) under 16 parents, 100 bytes of
// data each, on a real on-disk store. Reported as creates/s.
func BenchmarkApplyCreate(b *testing.B) {
	for _, batchSize := range []int{1, 64, 256} {
		b.Run(fmt.Sprintf("batch=%d", batchSize), func(b *testing.B) {
			s := openTestStore(b)
			const parents = 16
			idx := uint64(1)
			for p := range parents {
				s.Apply(idx, 1, &namespace.Command{Op: namespace.OpCreate, Path: fmt.Sprintf("/p%d", p)})
				idx++
			}
			data := make([]byte, 100)
			cmds := make([]namespace.Command, b.N)
			for i := range cmds {
				cmds[i] = namespace.Command{Op: namespace.OpCreate, Path: fmt.Sprintf("/p%d/n%d", i%parents, i), Data: data}
			}
			batch := make([]namespace.BatchEntry, 0, batchSize)
			b.ReportAllocs()
			b.ResetTimer()
			stop := reportCPU(b)
			for i := range cmds {
				batch = append(batch, namespace.BatchEntry{Index: idx, Time: int64(idx), Cmd: &cmds[i]})
				idx++
				if len(batch) == batchSize || i == len(cmds)-1 {
					for _, r := range s.ApplyBatch(batch) {
						if r.Err != nil {
							b.Fatal(r.Err)
						}
					}
					batch = batch[:0]
				}
			}
			b.StopTimer()
			stop()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
		})
	}
}

// BenchmarkApplySequentialEphemeral is the lock-queue shape: sequential
// ephemeral creates under one parent, then their session's expiry.
func BenchmarkApplySequentialEphemeral(b *testing.B) {
	s := openTestStore(b)
	s.Apply(1, 1, &namespace.Command{Op: namespace.OpCreate, Path: "/lock"})
	s.Apply(2, 1, &namespace.Command{Op: namespace.OpSessionOpen, TTLMillis: 1000})
	idx := uint64(3)
	batch := make([]namespace.BatchEntry, 0, 64)
	cmd := &namespace.Command{Op: namespace.OpCreate, Path: "/lock/req-", Flags: namespace.FlagEphemeral | namespace.FlagSequential, Session: 2}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		batch = append(batch, namespace.BatchEntry{Index: idx, Time: int64(idx), Cmd: cmd})
		idx++
		if len(batch) == cap(batch) || i == b.N-1 {
			for _, r := range s.ApplyBatch(batch) {
				if r.Err != nil {
					b.Fatal(r.Err)
				}
			}
			batch = batch[:0]
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
}

// BenchmarkSnapshotRestore100k snapshots and restores a 100,000-node tree.
func BenchmarkSnapshotRestore100k(b *testing.B) {
	src := openTestStore(b)
	fillTree(b, src, 100_000, 100)
	dst := openTestStore(b)
	b.ResetTimer()
	for range b.N {
		snap, err := src.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		pr, pw := io.Pipe()
		go func() {
			_, err := snap.WriteTo(pw)
			pw.CloseWithError(err)
		}()
		if err := dst.Restore(pr); err != nil {
			b.Fatal(err)
		}
		snap.Release()
	}
}

// BenchmarkIntegrity100k measures what integrity costs on a 100,000-node
// store: Open (which verifies every table and reads every value once) and
// a state hash (what every member does per hash check).
func BenchmarkIntegrity100k(b *testing.B) {
	dir := b.TempDir()
	s, err := Open(Config{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	fillTree(b, s, 100_000, 100)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.Run("open", func(b *testing.B) {
		for range b.N {
			s, err := Open(Config{Dir: dir})
			if err != nil {
				b.Fatal(err)
			}
			s.Close()
		}
	})
	b.Run("hash", func(b *testing.B) {
		s, err := Open(Config{Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		for range b.N {
			snap, err := s.Snapshot()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := snap.Hash(); err != nil {
				b.Fatal(err)
			}
			snap.Release()
		}
	})
}

// BenchmarkEntryCodec is what every proposal (encode, on the leader) and
// every applied entry (decode, on each member) pays for the log format.
func BenchmarkEntryCodec(b *testing.B) {
	e := &namespace.Entry{Time: 1_700_000_000_000_000_000, Cmd: namespace.Command{Op: namespace.OpLockRequest, Path: "/latch-bench-0123456789ab/contended/l3",
		Session: 123456, Identity: "bench-client", RequestID: "r-1234"}}
	enc, err := namespace.EncodeEntry(e)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := namespace.EncodeEntry(e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := namespace.DecodeEntry(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
