package raftstore

import (
	"testing"

	"github.com/hashicorp/raft"
)

// TestWALReopensAfterTailTruncation: a follower clears a conflicting log
// suffix (DeleteRange of the tail) and appends the new leader's entries;
// the WAL must reopen afterwards and serve every entry. raft-wal v0.4.0
// sealed the segment without its index block here, and the member then
// panicked at its next start ("sealed segment has no index block",
// hashicorp/raft-wal#31): fast elections on a loaded machine, with a
// leader SIGKILLed mid-append, made that common.
func TestWALReopensAfterTailTruncation(t *testing.T) {
	dir := t.TempDir()
	open := func() *WAL {
		w, err := OpenWAL(WALConfig{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := open()
	store := func(lo, hi, term uint64) {
		var logs []*raft.Log
		for i := lo; i <= hi; i++ {
			logs = append(logs, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: []byte("x")})
		}
		if err := w.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
	}
	store(1, 20, 1)
	if err := w.DeleteRange(15, 20); err != nil { // the conflicting suffix
		t.Fatal(err)
	}
	store(15, 25, 2)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = open()
	defer w.Close()
	for i := uint64(1); i <= 25; i++ {
		var l raft.Log
		if err := w.GetLog(i, &l); err != nil {
			t.Fatalf("GetLog(%d) after reopening: %v", i, err)
		}
		want := uint64(1)
		if i >= 15 {
			want = 2
		}
		if l.Term != want {
			t.Fatalf("entry %d has term %d, want %d", i, l.Term, want)
		}
	}
}
