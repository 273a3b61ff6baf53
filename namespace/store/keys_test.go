package store

import (
	"testing"

	"github.com/latch-io/latch/namespace"
)

// FuzzNodeKey checks that every path ValidatePath accepts maps to a node
// key and back.
func FuzzNodeKey(f *testing.F) {
	for _, s := range []string{"/", "/a", "/a/b", "//", "/a/", "/./..", "/a\x00b", "/\xff", "/日本",
		"/\u00e9", "/e\u0301", "/a\u200bb", "/\u6771\u4eac-tokyo"} {
		f.Add(s)
	}
	l := namespace.DefaultLimits()
	f.Fuzz(func(t *testing.T, p string) {
		if namespace.ValidatePath(p, l) != nil {
			return
		}
		if got := pathOfNodeKey(nodeKey(p)); got != p {
			t.Fatalf("node key of %q maps back to %q", p, got)
		}
	})
}
