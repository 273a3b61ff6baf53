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
		fh, err := os.OpenFile(f, os.O_WRONLY, 0)
		if err != nil {
			t.Fatalf("proc: %v", err)
		}
		_, err = fh.WriteAt([]byte{b[at] ^ 0x01}, int64(at))
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatalf("proc: flip a byte of %s: %v", f, err)
		}
		return f
	}
	t.Fatalf("proc: no %s file in %s holds %q (files: %v)", ext, dir, pattern, files)
	return ""
}
