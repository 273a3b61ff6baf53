package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latch-io/latch/namespace"
)

// flipIn flips one byte of the first occurrence of pattern in the files of
// dir whose names end in ext, and reports the file it changed. It is
// proc.FlipByte, which the client and server tests use; namespace's own
// tests cannot import proc (proc imports namespace).
func flipIn(t *testing.T, dir, ext string, pattern []byte) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*"+ext))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		i := bytes.Index(b, pattern)
		if i < 0 {
			continue
		}
		fh, err := os.OpenFile(f, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		at := int64(i + len(pattern)/2)
		if _, err := fh.WriteAt([]byte{b[at] ^ 0x01}, at); err != nil {
			t.Fatal(err)
		}
		return f
	}
	t.Fatalf("no %s file in %s holds the pattern (files %v)", ext, dir, files)
	return ""
}

// TestCorruptValueIsNeverApplied damages a value in the value log under a
// running store: the command that reads it is not applied (the applied
// index stays), the store reports the fault and refuses everything after,
// reads fail instead of returning the damaged bytes, and the store refuses
// to open again. Before checksums were verified the damaged bytes were
// served ("node format 0") and the failed command counted as applied.
func TestCorruptValueIsNeverApplied(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	big := bytes.Repeat([]byte("value-log-payload."), 500) // 9 KB: kept in the value log
	if r := s.Apply(1, 1, &namespace.Command{Op: namespace.OpCreate, Path: "/big", Data: big}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r := s.Apply(2, 2, &namespace.Command{Op: namespace.OpCreate, Path: "/small"}); r.Err != nil {
		t.Fatal(r.Err)
	}
	flipIn(t, dir, ".vlog", big[:64])

	r := s.ApplyBatch([]namespace.BatchEntry{
		{Index: 3, Time: 3, Cmd: &namespace.Command{Op: namespace.OpCreate, Path: "/before"}},
		{Index: 4, Time: 4, Cmd: &namespace.Command{Op: namespace.OpSet, Path: "/big", Data: []byte("x"), Version: namespace.AnyVersion}},
		{Index: 5, Time: 5, Cmd: &namespace.Command{Op: namespace.OpCreate, Path: "/after"}},
	})
	for i, res := range r {
		if !errors.Is(res.Err, namespace.ErrStorage) {
			t.Errorf("entry %d: %v, want ErrStorage (the batch is not applied)", i+3, res.Err)
		}
	}
	if got := s.AppliedIndex(); got != 2 {
		t.Fatalf("AppliedIndex = %d after a failed read, want 2", got)
	}
	select {
	case <-s.Failed():
	default:
		t.Fatal("Failed not closed")
	}
	if !errors.Is(s.Err(), namespace.ErrStorage) || !strings.Contains(s.Err().Error(), "checksum") {
		t.Fatalf("Err = %v", s.Err())
	}
	if res := s.Apply(6, 6, &namespace.Command{Op: namespace.OpCreate, Path: "/later"}); !errors.Is(res.Err, namespace.ErrStorage) {
		t.Fatalf("a later command: %v, want ErrStorage", res.Err)
	}
	if _, _, err := s.Get("/big"); !errors.Is(err, namespace.ErrStorage) {
		t.Fatalf("Get of the damaged node: %v, want ErrStorage", err)
	}
	s.Close()
	if _, err := Open(Config{Dir: dir}); !errors.Is(err, namespace.ErrStorage) {
		t.Fatalf("Open of a damaged store: %v, want ErrStorage", err)
	}
}

// TestCorruptTableRefusesOpen damages node data inside a table (.sst)
// while the store is closed: Open refuses it.
func TestCorruptTableRefusesOpen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("table-resident-node-data")
	for i := range 200 {
		r := s.Apply(uint64(i+1), 1, &namespace.Command{Op: namespace.OpCreate, Path: "/n" + string(rune('a'+i%26)) + strings.Repeat("x", i/26), Data: data})
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if err := s.Close(); err != nil { // flushes the memtable into a table
		t.Fatal(err)
	}
	flipIn(t, dir, ".sst", data)
	if _, err := Open(Config{Dir: dir}); !errors.Is(err, namespace.ErrStorage) {
		t.Fatalf("Open of a damaged table: %v, want ErrStorage", err)
	}
}
