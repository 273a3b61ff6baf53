package raftstore

import (
	"testing"

	"github.com/hashicorp/raft"
)

// TestStoreLogsSealAllocs bounds what StoreLogs allocates per entry of a
// batch of 64: the checksum trailers of a batch share one buffer and one
// scratch header, leaving raft-wal's own encoding (its frame buffer,
// codec and segment writes: 6 per entry with raft-wal v0.4). Sealing each
// entry on its own again (two more per entry) fails this.
func TestStoreLogsSealAllocs(t *testing.T) {
	w, err := OpenWAL(WALConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const batch, runs = 64, 20
	data := make([]byte, 100)
	all := make([]raft.Log, batch*(runs+1))
	ptrs := make([]*raft.Log, len(all))
	for i := range all {
		all[i] = raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: data}
		ptrs[i] = &all[i]
	}
	next := 0
	allocs := testing.AllocsPerRun(runs, func() {
		if err := w.StoreLogs(ptrs[next : next+batch]); err != nil {
			t.Fatal(err)
		}
		next += batch
	})
	if per, bound := allocs/batch, 6.5; per > bound && !raceEnabled {
		t.Fatalf("StoreLogs: %.1f allocations per entry in a batch of %d, bound %.1f", per, batch, bound)
	}
	for i := 1; i <= next; i += 97 {
		var l raft.Log
		if err := w.GetLog(uint64(i), &l); err != nil || l.Index != uint64(i) || len(l.Data) != len(data) || len(l.Extensions) != 0 {
			t.Fatalf("entry %d read back: %+v, %v", i, l, err)
		}
	}
}
