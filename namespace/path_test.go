package namespace

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"
)

func TestValidatePath(t *testing.T) {
	l := DefaultLimits()
	tests := []struct {
		path string
		ok   bool
	}{
		{"/", true},
		{"/a", true},
		{"/a/b/c", true},
		{"/.a", true},
		{"/a.", true},
		{"/...", true},
		{"/a b", true},
		{"/日本/ß", true},
		{"/" + strings.Repeat("x", 1023), true},
		{strings.Repeat("/d", 64), true},

		{"", false},
		{"a", false},
		{"a/b", false},
		{"//", false},
		{"/a/", false},
		{"//a", false},
		{"/a//b", false},
		{"/.", false},
		{"/..", false},
		{"/a/.", false},
		{"/a/../b", false},
		{"/a\x00", false},
		{"/a\tb", false},
		{"/\x1f", false},
		{"/\x7f", false},
		{"/\u0080", false},
		{"/\u009f", false},
		{"/\xff", false},
		{"/\xe6\x97", false}, // truncated multi-byte rune
		{"/" + strings.Repeat("x", 1024), false},

		// One spelling per name (pathspell.go).
		{"/\u00e9", true},                    // é, NFC
		{"/e\u0301", false},                  // é as e + combining acute: NFD
		{"/\u212b", false},                   // Angstrom sign: NFC is U+00C5
		{"/a/\u1100\u1161", false},           // Hangul jamo: NFC is U+AC00
		{"/a\u200bb", false},                 // zero-width space
		{"/a\u200db", false},                 // zero-width joiner
		{"/a\u202eb", false},                 // right-to-left override
		{"/a\u2066b", false},                 // left-to-right isolate
		{"/\ufeffa", false},                  // byte-order mark
		{"/a\u00adb", false},                 // soft hyphen
		{"/a\u034fb", false},                 // combining grapheme joiner
		{"/\u3164", false},                   // Hangul filler
		{"/a\ufe0f", false},                  // variation selector
		{"/p\u0430ypal", false},              // Latin with a Cyrillic а
		{"/\u03bfk", false},                  // Greek ο with Latin k
		{"/\u043f\u03c1", false},             // Cyrillic with Greek
		{"/paypal/\u043f\u0440\u0438", true}, // one script per component
		{"/\u6771\u4eac-tokyo", true},        // Han with Latin
		{"/\u03b1\u03b2\u03b3-2", true},      // Greek with digits
		{"/\u041c\u043e\u0441\u043a\u0432\u0430", true},
		{"/caf\u00e9 \u2013 na\u00efve", true},
		{strings.Repeat("/d", 65), false},
	}
	for _, tt := range tests {
		err := ValidatePath(tt.path, l)
		if tt.ok && err != nil {
			t.Errorf("ValidatePath(%q) = %v, want nil", tt.path, err)
		}
		if !tt.ok && !errors.Is(err, ErrBadPath) {
			t.Errorf("ValidatePath(%q) = %v, want ErrBadPath", tt.path, err)
		}
	}
}

func TestValidatePathLimits(t *testing.T) {
	l := Limits{MaxPathBytes: 6, MaxDepth: 2, MaxMultiOps: 1, MaxChildrenPage: 1}
	for p, ok := range map[string]bool{"/a/b": true, "/abcde": true, "/abcdef": false, "/a/b/c": false} {
		if err := ValidatePath(p, l); (err == nil) != ok {
			t.Errorf("ValidatePath(%q, %+v) = %v, want ok=%t", p, l, err, ok)
		}
	}
}

func TestParentBaseJoin(t *testing.T) {
	tests := []struct{ path, parent, base string }{
		{"/", "/", ""},
		{"/a", "/", "a"},
		{"/a/b", "/a", "b"},
		{"/a/b/c", "/a/b", "c"},
	}
	for _, tt := range tests {
		if got := Parent(tt.path); got != tt.parent {
			t.Errorf("Parent(%q) = %q, want %q", tt.path, got, tt.parent)
		}
		if got := Base(tt.path); got != tt.base {
			t.Errorf("Base(%q) = %q, want %q", tt.path, got, tt.base)
		}
		if tt.path != "/" {
			if got := Join(tt.parent, tt.base); got != tt.path {
				t.Errorf("Join(%q, %q) = %q, want %q", tt.parent, tt.base, got, tt.path)
			}
		}
	}
}

// FuzzValidatePath checks that the parser never panics and that every
// path it accepts is one spelling that Join(Parent, Base) gives back (the
// store's FuzzNodeKey maps it to a node key and back).
func FuzzValidatePath(f *testing.F) {
	for _, s := range []string{"/", "/a", "/a/b", "//", "/a/", "/./..", "/a\x00b", "/\xff", "/日本",
		"/\u00e9", "/e\u0301", "/a\u200bb", "/a\u202eb", "/\ufeffa", "/p\u0430ypal", "/\u6771\u4eac-tokyo", "/\u3164", "/a\ufe0f"} {
		f.Add(s)
	}
	l := DefaultLimits()
	f.Fuzz(func(t *testing.T, p string) {
		if ValidatePath(p, l) != nil {
			return
		}
		if p != "/" && Join(Parent(p), Base(p)) != p {
			t.Fatalf("Join(Parent, Base) of %q = %q", p, Join(Parent(p), Base(p)))
		}
		// One spelling per name: what is accepted is NFC and shows every
		// code point it holds.
		if !norm.NFC.IsNormalString(p) {
			t.Fatalf("accepted %q, which is not NFC", p)
		}
		for _, r := range p {
			if invisible(r) != "" {
				t.Fatalf("accepted %q with the invisible %U", p, r)
			}
		}
	})
}
