package raftnode

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latch-io/latch/namespace"
)

// loadTree applies creates of a tree of n nodes (100 directories of n/100
// children with 100-byte data) through the FSM, in raft-sized batches.
func loadTree(tb testing.TB, f *FSM, n int) {
	tb.Helper()
	data := make([]byte, 100)
	index := uint64(0)
	var batch []*raft.Log
	flush := func() {
		for _, out := range f.ApplyBatch(batch) {
			if r := out.(*namespace.Result); r.Err != nil {
				tb.Fatalf("load: %v", r.Err)
			}
		}
		batch = batch[:0]
	}
	add := func(path string) {
		index++
		batch = append(batch, commandLog(tb, index, namespace.Command{Op: namespace.OpCreate, Path: path, Data: data}))
		if len(batch) == 256 {
			flush()
		}
	}
	dirs := 100
	for d := 0; d < dirs; d++ {
		add(fmt.Sprintf("/d%03d", d))
	}
	for i := 0; i < n-dirs; i++ {
		add(fmt.Sprintf("/d%03d/n%06d", i%dirs, i))
	}
	flush()
}

func heapMiB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

// BenchmarkSnapshotRestore100k measures a raft snapshot (FSM snapshot
// persisted to a FileSnapshotStore) and its restore into a fresh store for a
// 100,000-node tree, and the heap with the tree loaded. Run with
// -benchtime 1x.
func BenchmarkSnapshotRestore100k(b *testing.B) {
	const nodes = 100_000
	base := heapMiB()
	src := NewFSM(FSMConfig{Store: openStore(b)})
	loadStart := time.Now()
	loadTree(b, src, nodes)
	loadTime := time.Since(loadStart)
	heap := heapMiB() - base

	snaps, err := raft.NewFileSnapshotStoreWithLogger(b.TempDir(), 1, NewHCLog(discardLogger(), "snapshots"))
	if err != nil {
		b.Fatal(err)
	}
	var snapTotal, restoreTotal time.Duration
	for b.Loop() {
		start := time.Now()
		snap, err := src.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		sink, err := snaps.Create(raft.SnapshotVersionMax, src.store.AppliedIndex(), 1, raft.Configuration{}, 0, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := snap.Persist(sink); err != nil {
			b.Fatal(err)
		}
		snap.Release()
		snapTotal += time.Since(start)

		dst := NewFSM(FSMConfig{Store: openStore(b)})
		start = time.Now()
		_, rc, err := snaps.Open(sink.ID())
		if err != nil {
			b.Fatal(err)
		}
		if err := dst.Restore(rc); err != nil {
			b.Fatal(err)
		}
		restoreTotal += time.Since(start)
		if got := dst.store.AppliedIndex(); got != src.store.AppliedIndex() {
			b.Fatalf("restored applied index %d, want %d", got, src.store.AppliedIndex())
		}
		if _, _, err := dst.store.Get(fmt.Sprintf("/d%03d/n%06d", (nodes-101)%100, nodes-101)); err != nil {
			b.Fatalf("restored tree lacks the last node: %v", err)
		}
		dst.store.Close()
	}
	// Reported after the loop: b.Loop clears metrics reported before it.
	b.ReportMetric(loadTime.Seconds(), "load-s")
	b.ReportMetric(heap, "heap-MiB-loaded")
	b.ReportMetric(snapTotal.Seconds()/float64(b.N), "snapshot-s")
	b.ReportMetric(restoreTotal.Seconds()/float64(b.N), "restore-s")
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
