package store

import (
	"fmt"
	"testing"

	"github.com/latch-io/latch/namespace"
)

// The apply path runs on every member for every write; its allocations
// are CPU on the machine's cores. These bounds keep them from creeping
// back one per entry at a time.

// TestApplyBatchAllocsPerSet bounds what a set costs in a batch of 32 on a
// real on-disk store, badger's commit included. Today: about 4 per set of
// ours became per batch (the results, the events, the node copies of the
// read cache), leaving about 15, 11 of them badger's own (its entry, its
// keys with timestamps, its WAL encoder). One more per entry fails this.
func TestApplyBatchAllocsPerSet(t *testing.T) {
	s := openTestStore(t)
	const nodes, batchLen = 64, 32
	idx := uint64(1)
	data := make([]byte, 100)
	cmds := make([]namespace.Command, nodes)
	for i := range cmds {
		p := fmt.Sprintf("/n%d", i)
		if r := s.Apply(idx, 1, &namespace.Command{Op: namespace.OpCreate, Path: p, Data: data}); r.Err != nil {
			t.Fatal(r.Err)
		}
		idx++
		cmds[i] = namespace.Command{Op: namespace.OpSet, Path: p, Data: data, Version: -1}
	}
	batch := make([]namespace.BatchEntry, batchLen)
	var failed error
	perBatch := testing.AllocsPerRun(100, func() {
		for i := range batch {
			batch[i] = namespace.BatchEntry{Index: idx, Time: int64(idx), Cmd: &cmds[idx%nodes]}
			idx++
		}
		for _, r := range s.ApplyBatch(batch) {
			if r.Err != nil && failed == nil {
				failed = r.Err
			}
			if len(r.Events) != 1 || r.Events[0].Type != namespace.EventDataChanged || r.Events[0].Rev != r.Index {
				failed = fmt.Errorf("set at %d: events %+v, want one data change at its index", r.Index, r.Events)
			}
		}
	})
	if failed != nil {
		t.Fatal(failed)
	}
	if per, bound := perBatch/batchLen, 16.5; per > bound {
		t.Fatalf("ApplyBatch: %.1f allocations per set in a batch of %d, bound %.1f", per, batchLen, bound)
	}
}

// TestReadCacheHitAllocs: reading a cached node and writing it back, as a
// set does, allocates nothing.
func TestReadCacheHitAllocs(t *testing.T) {
	rc := newReadCache()
	n := &node{stat: namespace.Stat{Version: 1}, data: []byte("x")}
	rc.putNode("/a", n)
	allocs := testing.AllocsPerRun(100, func() {
		got, exists, found := rc.node("/a")
		if !exists || !found {
			t.Fatal("cached node not found")
		}
		got.stat.Version++
		rc.putNode("/a", &got)
	})
	if allocs != 0 {
		t.Fatalf("read cache hit and write back: %.1f allocations, want 0", allocs)
	}
	if got, _, _ := rc.node("/a"); got.stat.Version != 1+101 {
		t.Fatalf("version %d after 101 write backs, want %d", got.stat.Version, 1+101)
	}
}

// TestBatchEventsDoNotOverlap: each command's events live in the batch's
// shared array; appending to one result's events must not reach the next
// command's.
func TestBatchEventsDoNotOverlap(t *testing.T) {
	s := openTestStore(t)
	rs := s.ApplyBatch([]namespace.BatchEntry{
		{Index: 1, Time: 1, Cmd: &namespace.Command{Op: namespace.OpCreate, Path: "/a"}},
		{Index: 2, Time: 1, Cmd: &namespace.Command{Op: namespace.OpSet, Path: "/missing"}}, // refused: no events
		{Index: 3, Time: 1, Cmd: &namespace.Command{Op: namespace.OpCreate, Path: "/b"}},
	})
	if rs[1].Err == nil || rs[1].Events != nil {
		t.Fatalf("refused set: err %v, events %+v", rs[1].Err, rs[1].Events)
	}
	first := rs[0].Events
	if len(first) == 0 || first[0].Path != "/a" {
		t.Fatalf("create /a: events %+v", first)
	}
	_ = append(first, namespace.Event{Path: "/appended"})
	for _, e := range rs[2].Events {
		if e.Rev != 3 {
			t.Fatalf("create /b: event %+v changed by an append to /a's events", e)
		}
	}
	if len(rs[2].Events) == 0 || rs[2].Events[0].Path != "/b" {
		t.Fatalf("create /b: events %+v", rs[2].Events)
	}
}
