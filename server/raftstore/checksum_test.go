package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

func payloadOf(i uint64) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("entry-%05d-", i)), 8)
}

func storeEntries(t *testing.T, s raft.LogStore, lo, hi uint64) {
	t.Helper()
	for i := lo; i <= hi; i++ { // one batch per entry, as a loaded leader writes
		l := &raft.Log{Index: i, Term: 2, Type: raft.LogCommand, Data: payloadOf(i), AppendedAt: time.Unix(0, int64(i))}
		if i%3 == 0 {
			l.Extensions = []byte("ext")
		}
		if err := s.StoreLogs([]*raft.Log{l}); err != nil {
			t.Fatal(err)
		}
	}
}

// flipBytes XORs n bytes in the middle of the first occurrence of pattern
// in dir's segment files, as a bad disk would, and returns the file.
func flipBytes(t *testing.T, dir string, pattern []byte, n int) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		i := bytes.Index(b, pattern)
		if i < 0 {
			continue
		}
		at := i + len(pattern)/2
		for j := at; j < at+n; j++ {
			b[j] ^= 0xff
		}
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	t.Fatalf("no segment in %s holds %q", dir, pattern)
	return ""
}

// TestWALRefusesDamagedLog: eight bytes flipped in one entry of a closed
// WAL. raft-wal alone reopens it and serves the changed bytes (it checks
// the CRC of the tail segment's last batch at open, nothing on read);
// OpenWAL refuses it with an error naming the entry and the file.
func TestWALRefusesDamagedLog(t *testing.T) {
	dir := t.TempDir()
	w := openTestWAL(t, dir)
	storeEntries(t, w, 1, 40)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	file := flipBytes(t, dir, payloadOf(17), 8)

	// What the member ran on before: raft-wal by itself.
	meta := &metadb.BoltMetaDB{}
	raw, err := wal.Open(dir, wal.WithMetaStore(meta))
	if err != nil {
		t.Fatalf("raft-wal refused the damaged log itself: %v", err)
	}
	var l raft.Log
	if err := raw.GetLog(17, &l); err != nil {
		t.Fatalf("raft-wal GetLog(17): %v", err)
	}
	if bytes.Equal(l.Data, payloadOf(17)) {
		t.Fatal("the flip did not change entry 17")
	}
	raw.Close()
	meta.Close()

	_, err = OpenWAL(WALConfig{Dir: dir})
	if !errors.Is(err, ErrCorruptLog) {
		t.Fatalf("OpenWAL of a damaged log: %v, want ErrCorruptLog", err)
	}
	for _, want := range []string{"entry 17 ", filepath.Base(file)} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not name %q", err, want)
		}
	}
}

// TestWALFailsOnDamageWhileOpen: damage under an open WAL is found on the
// read that meets it; the entry is not returned and Failed is closed.
func TestWALFailsOnDamageWhileOpen(t *testing.T) {
	dir := t.TempDir()
	w := openTestWAL(t, dir)
	storeEntries(t, w, 1, 40)
	select {
	case <-w.Failed():
		t.Fatal("Failed closed on a sound log")
	default:
	}
	flipBytes(t, dir, payloadOf(9), 8)
	var l raft.Log
	err := w.GetLog(9, &l)
	if !errors.Is(err, ErrCorruptLog) || !strings.Contains(err.Error(), "entry 9 ") {
		t.Fatalf("GetLog(9) of a damaged entry: %v (data %q)", err, l.Data)
	}
	select {
	case <-w.Failed():
	default:
		t.Fatal("Failed not closed")
	}
	if !errors.Is(w.Err(), ErrCorruptLog) {
		t.Fatalf("Err = %v", w.Err())
	}
	// Sound entries are still served as written.
	if err := w.GetLog(10, &l); err != nil || !bytes.Equal(l.Data, payloadOf(10)) {
		t.Fatalf("GetLog(10) = %q, %v", l.Data, err)
	}
}

// TestWALEntriesRoundTrip: the checksum trailer is invisible to raft:
// every field, Extensions included, comes back as stored, after a reopen
// too, and the caller's entries are not changed by StoreLogs.
func TestWALEntriesRoundTrip(t *testing.T) {
	dir := t.TempDir()
	w := openTestWAL(t, dir)
	in := &raft.Log{Index: 1, Term: 3, Type: raft.LogConfiguration, Data: []byte("d"), Extensions: []byte("x"), AppendedAt: time.Unix(5, 6)}
	if err := w.StoreLog(in); err != nil {
		t.Fatal(err)
	}
	storeEntries(t, w, 2, 9)
	if string(in.Extensions) != "x" {
		t.Fatalf("StoreLog changed the caller's Extensions to %q", in.Extensions)
	}
	check := func(w *WAL) {
		t.Helper()
		var l raft.Log
		if err := w.GetLog(1, &l); err != nil {
			t.Fatal(err)
		}
		if l.Index != 1 || l.Term != 3 || l.Type != raft.LogConfiguration || string(l.Data) != "d" ||
			string(l.Extensions) != "x" || !l.AppendedAt.Equal(in.AppendedAt) {
			t.Fatalf("entry 1 read back as %+v", l)
		}
		for i := uint64(2); i <= 9; i++ {
			if err := w.GetLog(i, &l); err != nil || !bytes.Equal(l.Data, payloadOf(i)) {
				t.Fatalf("entry %d: %q, %v", i, l.Data, err)
			}
			if want := i%3 == 0; want != (string(l.Extensions) == "ext") || (!want && l.Extensions != nil) {
				t.Fatalf("entry %d Extensions %q", i, l.Extensions)
			}
		}
	}
	check(w)
	w.Close()
	check(openTestWAL(t, dir))
}

// TestWALOpensLogWithoutChecksums: a WAL written by a latch that did not
// checksum (plain raft-wal) still opens and serves its entries; entries
// appended afterwards are checksummed, and the start of checksums
// survives a reopen.
func TestWALOpensLogWithoutChecksums(t *testing.T) {
	dir := t.TempDir()
	meta := &metadb.BoltMetaDB{}
	raw, err := wal.Open(dir, wal.WithMetaStore(meta))
	if err != nil {
		t.Fatal(err)
	}
	storeEntries(t, raw, 1, 10)
	raw.Close()
	meta.Close()

	w := openTestWAL(t, dir)
	if w.checkedFrom != 11 {
		t.Fatalf("checkedFrom = %d, want 11", w.checkedFrom)
	}
	storeEntries(t, w, 11, 20)
	var l raft.Log
	for i := uint64(1); i <= 20; i++ {
		if err := w.GetLog(i, &l); err != nil || !bytes.Equal(l.Data, payloadOf(i)) {
			t.Fatalf("entry %d: %q, %v", i, l.Data, err)
		}
		if i%3 == 0 && string(l.Extensions) != "ext" {
			t.Fatalf("entry %d Extensions %q", i, l.Extensions)
		}
	}
	w.Close()
	w = openTestWAL(t, dir)
	if w.checkedFrom != 11 {
		t.Fatalf("checkedFrom after reopen = %d, want 11", w.checkedFrom)
	}
	w.Close()
	// An entry written with a checksum is verified on open.
	flipBytes(t, dir, payloadOf(15), 8)
	if _, err := OpenWAL(WALConfig{Dir: dir}); !errors.Is(err, ErrCorruptLog) {
		t.Fatalf("OpenWAL: %v, want ErrCorruptLog", err)
	}
}

// FuzzOpenEntry: whatever an entry's Extensions hold, checking it never
// panics, and a sealed entry always opens to what was sealed.
func FuzzOpenEntry(f *testing.F) {
	f.Add([]byte("data"), []byte{}, uint64(3))
	f.Add([]byte{}, []byte{1, 2, 3, 4, 'L', 1}, uint64(1))
	f.Fuzz(func(t *testing.T, data, ext []byte, index uint64) {
		l := raft.Log{Index: index, Term: 1, Data: data, Extensions: ext}
		_ = openEntry(index, index, &l)
		l = raft.Log{Index: index, Term: 1, Data: data, Extensions: ext}
		l.Extensions = sealEntry(&l)
		if err := openEntry(index, 0, &l); err != nil || !bytes.Equal(l.Extensions, ext) {
			t.Fatalf("sealed entry: %v, Extensions %q want %q", err, l.Extensions, ext)
		}
	})
}

// BenchmarkOpenWAL measures what verifying every entry adds to a member's
// start: opening a WAL of 18,432 entries of 256 bytes (the most a member
// keeps with the default SnapshotThreshold and TrailingLogs), every entry
// read and checked.
func BenchmarkOpenWAL(b *testing.B) {
	dir := b.TempDir()
	w, err := OpenWAL(WALConfig{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	const n = 18432
	data := bytes.Repeat([]byte("d"), 256)
	for lo := uint64(1); lo <= n; lo += 256 {
		logs := make([]*raft.Log, 0, 256)
		for i := lo; i < lo+256; i++ {
			logs = append(logs, &raft.Log{Index: i, Term: 1, Data: data, AppendedAt: time.Now()})
		}
		if err := w.StoreLogs(logs); err != nil {
			b.Fatal(err)
		}
	}
	w.Close()
	for b.Loop() {
		w, err := OpenWAL(WALConfig{Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		w.Close()
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "entries/s")
}
