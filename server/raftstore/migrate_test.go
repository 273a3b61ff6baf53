package raftstore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
)

func openTestWAL(t testing.TB, dir string) *WAL {
	t.Helper()
	w, err := OpenWAL(WALConfig{Dir: dir})
	if err != nil {
		t.Fatalf("OpenWAL: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// TestMigrateFromBadger: a badger store written by an older member moves
// into the WAL whole (log, numeric and byte stable keys), and is removed.
func TestMigrateFromBadger(t *testing.T) {
	root := t.TempDir()
	oldDir, walDir := filepath.Join(root, "raft"), filepath.Join(root, "raft-wal")
	old, err := Open(Config{Dir: oldDir})
	if err != nil {
		t.Fatal(err)
	}
	storeRange(t, old, 5, 700) // a compacted log: first index 5, over several copy batches
	if err := old.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := old.Set([]byte("LastVoteCand"), []byte("n2")); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	// A WAL left by a migration that crashed before its end is started over.
	if err := os.MkdirAll(walDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(walDir, "junk"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}

	w, err := OpenWAL(WALConfig{Dir: walDir, MigrateFrom: oldDir})
	if err != nil {
		t.Fatalf("OpenWAL with migration: %v", err)
	}
	defer w.Close()
	if _, err := os.Stat(oldDir); !os.IsNotExist(err) {
		t.Fatalf("badger store still there after migration: %v", err)
	}
	if f, _ := w.FirstIndex(); f != 5 {
		t.Fatalf("FirstIndex = %d, want 5", f)
	}
	if l, _ := w.LastIndex(); l != 700 {
		t.Fatalf("LastIndex = %d, want 700", l)
	}
	for _, i := range []uint64{5, 256, 261, 700} {
		var got raft.Log
		if err := w.GetLog(i, &got); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		want := testLog(i)
		if got.Index != i || got.Term != want.Term || string(got.Data) != string(want.Data) || string(got.Extensions) != string(want.Extensions) || !got.AppendedAt.Equal(want.AppendedAt) {
			t.Fatalf("GetLog(%d) = %+v, want %+v", i, got, *want)
		}
	}
	if term, err := w.GetUint64([]byte("CurrentTerm")); err != nil || term != 7 {
		t.Fatalf("CurrentTerm = %d, %v; want 7", term, err)
	}
	if cand, err := w.Get([]byte("LastVoteCand")); err != nil || string(cand) != "n2" {
		t.Fatalf("LastVoteCand = %q, %v; want n2", cand, err)
	}
	// Entries deleted from the head are gone, even inside the open segment.
	if err := w.DeleteRange(5, 9); err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := w.GetLog(9, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog(9) after DeleteRange(5, 9): %v, want ErrLogNotFound", err)
	}
	if err := w.GetLog(10, &l); err != nil {
		t.Fatalf("GetLog(10): %v", err)
	}
	// Without a badger store, OpenWAL just opens the WAL.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w2 := openTestWAL(t, walDir)
	if _, err := OpenWAL(WALConfig{Dir: walDir}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second OpenWAL of an open WAL: %v, want ErrLocked", err)
	}
	if f, _ := w2.FirstIndex(); f != 10 {
		t.Fatalf("after reopen FirstIndex = %d, want 10", f)
	}
	if l, _ := w2.LastIndex(); l != 700 {
		t.Fatalf("after reopen LastIndex = %d, want 700", l)
	}
}
