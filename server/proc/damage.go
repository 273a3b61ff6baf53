package proc

import (
	"bytes"
	"os"
	"path/filepath"
)

// FlipByte damages a store file the way a bad disk would: it flips one
// bit of the byte in the middle of the first occurrence of pattern in the
// files of dir whose names end in ext (".vlog", ".sst"), and returns the
// file it changed. It fails t when no such file holds pattern. The
// namespace package's tests keep their own copy: they cannot import proc,
// which imports namespace.
func FlipByte(t TB, dir, ext string, pattern []byte) string {
	t.Helper()
	return flip(t, dir, ext, pattern, 1, 0x01)
}

// FlipBytes inverts n bytes from the middle of the first occurrence of
// pattern in the files of dir whose names end in ext (".wal" for a raft
// log segment), the damage the hostile tester of issue 27 did to a raft
// log, and returns the file it changed. It fails t when no such file holds
// pattern, or pattern is too short to hold the flip.
func FlipBytes(t TB, dir, ext string, pattern []byte, n int) string {
	t.Helper()
	if n > len(pattern)-len(pattern)/2 {
		t.Fatalf("proc: a %d-byte pattern cannot hold %d flipped bytes from its middle", len(pattern), n)
	}
	return flip(t, dir, ext, pattern, n, 0xff)
}

// flip XORs n bytes with mask from the middle of the first occurrence of
// pattern in the files of dir ending in ext, and returns the file.
func flip(t TB, dir, ext string, pattern []byte, n int, mask byte) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*"+ext))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("proc: %v", err)
		}
		i := bytes.Index(b, pattern)
		if i < 0 {
			continue
		}
		at := i + len(pattern)/2
		flipped := make([]byte, n)
		for j := range flipped {
			flipped[j] = b[at+j] ^ mask
		}
		fh, err := os.OpenFile(f, os.O_WRONLY, 0)
		if err != nil {
			t.Fatalf("proc: %v", err)
		}
		_, err = fh.WriteAt(flipped, int64(at))
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatalf("proc: flip bytes of %s: %v", f, err)
		}
		return f
	}
	t.Fatalf("proc: no %s file in %s holds %q (files: %v)", ext, dir, pattern, files)
	return ""
}
