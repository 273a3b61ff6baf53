package flagfile

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// flags is a flag set with one flag of each kind the rules tell apart.
type flags struct {
	fs   *flag.FlagSet
	b    bool
	n    uint64
	i    int
	f    float64
	d    time.Duration
	s    string
	text textValue
}

// textValue is a flag.Value without Get: it takes text, like a string.
type textValue struct{ v string }

func (t *textValue) String() string     { return t.v }
func (t *textValue) Set(v string) error { t.v = v; return nil }

func newFlags() *flags {
	f := &flags{fs: flag.NewFlagSet("test", flag.ContinueOnError)}
	f.fs.BoolVar(&f.b, "b", false, "")
	f.fs.Uint64Var(&f.n, "n", 0, "")
	f.fs.IntVar(&f.i, "i", 0, "")
	f.fs.Float64Var(&f.f, "f", 0, "")
	f.fs.DurationVar(&f.d, "d", 0, "")
	f.fs.StringVar(&f.s, "s", "", "")
	f.fs.Var(&f.text, "text", "")
	return f
}

func write(t *testing.T, json string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(json), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTypeRules: each JSON type against each kind of flag.
func TestTypeRules(t *testing.T) {
	for _, tc := range []struct {
		json  string
		check func(*flags) bool
		err   string // "" when it must be accepted
	}{
		// numbers: written as given, for numbers and strings
		{`{"n": 18446744073709551615}`, func(f *flags) bool { return f.n == 1<<64-1 }, ""},
		{`{"n": 1000000}`, func(f *flags) bool { return f.n == 1000000 }, ""},
		{`{"i": -3}`, func(f *flags) bool { return f.i == -3 }, ""},
		{`{"f": 0.25}`, func(f *flags) bool { return f.f == 0.25 }, ""},
		{`{"s": 12}`, func(f *flags) bool { return f.s == "12" }, ""},
		{`{"i": 1.5}`, nil, `key "i"`},
		{`{"d": 3}`, nil, "a number given for a duration"},
		{`{"b": 1}`, nil, "a number given for a boolean"},
		// booleans: only for booleans
		{`{"b": true}`, func(f *flags) bool { return f.b }, ""},
		{`{"s": true}`, nil, "true/false given for a string"},
		{`{"n": false}`, nil, "true/false given for a number"},
		{`{"b": "yes"}`, nil, "a string given for a boolean"},
		// durations: strings
		{`{"d": "1500ms"}`, func(f *flags) bool { return f.d == 1500*time.Millisecond }, ""},
		{`{"d": "soon"}`, nil, `key "d"`},
		// strings, numbers as strings are parsed by the flag
		{`{"s": "x"}`, func(f *flags) bool { return f.s == "x" }, ""},
		{`{"n": "7"}`, func(f *flags) bool { return f.n == 7 }, ""},
		{`{"text": "t"}`, func(f *flags) bool { return f.text.v == "t" }, ""},
		// lists: of strings, for strings only
		{`{"s": ["a", "b"]}`, func(f *flags) bool { return f.s == "a,b" }, ""},
		{`{"text": ["a", "b"]}`, func(f *flags) bool { return f.text.v == "a,b" }, ""},
		{`{"s": ["a", 2]}`, nil, "list item 1 is not a string"},
		{`{"d": ["1s"]}`, nil, "a list given for a duration"},
		// the rest
		{`{"s": null}`, nil, "unsupported value"},
		{`{"s": {"a": 1}}`, nil, "unsupported value"},
		{`{"colour": "red"}`, nil, `unknown key "colour"`},
		{`["s"]`, nil, "cannot unmarshal"},
	} {
		f := newFlags()
		err := Apply(f.fs, write(t, tc.json), nil)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.json, err)
		case tc.err == "" && !tc.check(f):
			t.Errorf("%s: flags %+v", tc.json, f)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want an error naming %q", tc.json, err, tc.err)
		}
	}
}

// TestCommandLineWins: a flag set before Apply keeps its value; keys map
// through flagOf, and a key it refuses is unknown.
func TestCommandLineWins(t *testing.T) {
	f := newFlags()
	if err := f.fs.Parse([]string{"-s", "cli"}); err != nil {
		t.Fatal(err)
	}
	rename := func(k string) (string, bool) {
		if k == "string" {
			return "s", true
		}
		return k, k != "b"
	}
	if err := Apply(f.fs, write(t, `{"string": "file", "n": 5}`), rename); err != nil {
		t.Fatal(err)
	}
	if f.s != "cli" || f.n != 5 {
		t.Fatalf("s %q n %d: want the command line's s and the file's n", f.s, f.n)
	}
	if err := Apply(f.fs, write(t, `{"b": true}`), rename); !errors.Is(err, ErrUnknownKey) || f.b {
		t.Fatalf("refused key: %v, b %v", err, f.b)
	}
	if err := Apply(f.fs, filepath.Join(t.TempDir(), "missing.json"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}
