package namespace

import (
	"errors"
	"slices"
	"testing"
)

func TestParseRules(t *testing.T) {
	got, err := ParseRules(`
# team rules
alice /jobs rwcd
"" /public r
"Jane Doe" /jobs/jane all
* /shared none
	bob   /   rwcda   
`)
	if err != nil {
		t.Fatal(err)
	}
	want := []ACLRule{
		{"alice", "/jobs", PermRWCD},
		{"", "/public", PermRead},
		{"Jane Doe", "/jobs/jane", PermAll},
		{"*", "/shared", PermNone},
		{"bob", "/", PermAll},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	for _, bad := range []string{
		"alice /jobs",          // no rights
		"alice jobs rw",        // relative prefix
		"alice /jobs rwx",      // unknown right
		"alice /jobs/ rw",      // trailing slash
		`"alice /jobs rw`,      // unterminated quote
		`"alice"/jobs rw`,      // no space after the quote
		"alice /jobs rw extra", // too many fields
		"\"a\\x00b\" /jobs rw", // control character in the identity
		"alice /a/../b rw",     // relative component
	} {
		if _, err := ParseRules(bad); !errors.Is(err, ErrBadRule) {
			t.Errorf("ParseRules(%q) = %v, want ErrBadRule", bad, err)
		}
	}
}

// FuzzParseRules: the parser never panics, accepts only valid rules, and
// what it accepts prints back (ACLRule.String) to the same rules.
func FuzzParseRules(f *testing.F) {
	for _, s := range []string{
		"alice /jobs rwcd", `"" /public r`, `"Jane \"J\" Doe" / all`, "* /a/b none\n# c\nbob / a",
		"x / -", "\"\\u00e9\" /é rw", "a\t/\tr",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		rules, err := ParseRules(text)
		if err != nil {
			if !errors.Is(err, ErrBadRule) {
				t.Fatalf("error %v does not wrap ErrBadRule", err)
			}
			return
		}
		var again string
		for _, r := range rules {
			if err := ValidateRule(r, DefaultLimits()); err != nil {
				t.Fatalf("accepted invalid rule %q: %v", r, err)
			}
			again += r.String() + "\n"
		}
		back, err := ParseRules(again)
		if err != nil {
			t.Fatalf("printed rules %q do not parse: %v", again, err)
		}
		if !slices.Equal(rules, back) {
			t.Fatalf("round trip changed the rules: %v -> %q -> %v", rules, again, back)
		}
	})
}
