package main

import (
	"bytes"
	"flag"
	"slices"
	"strings"
	"testing"
)

func TestParseInterleaved(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		pos     []string
		version int64
		rec     bool
	}{
		{[]string{"/a", "x"}, []string{"/a", "x"}, -1, false},
		{[]string{"/a", "x", "--version", "3"}, []string{"/a", "x"}, 3, false},
		{[]string{"--version=4", "/a", "-r"}, []string{"/a"}, 4, true},
		{[]string{"/a", "--", "-r", "--version"}, []string{"/a", "-r", "--version"}, -1, false},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		version := fs.Int64("version", -1, "")
		rec := fs.Bool("r", false, "")
		pos, err := parseInterleaved(fs, tc.args)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if !slices.Equal(pos, tc.pos) || *version != tc.version || *rec != tc.rec {
			t.Errorf("%v: pos %v version %d r %v; want %v %d %v", tc.args, pos, *version, *rec, tc.pos, tc.version, tc.rec)
		}
	}
}

func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestHelpCoversEveryCommandAndFlag(t *testing.T) {
	code, out, _ := runCLI("help")
	if code != 0 {
		t.Fatalf("help exited %d", code)
	}
	for _, c := range sortedCommands() {
		if listed := strings.Contains(out, "  "+c.name+" "); listed == c.hidden {
			t.Errorf("latch help lists %s: %v, want %v (hidden commands stay off the list)", c.name, listed, !c.hidden)
		}
		code, out, _ := runCLI("help", c.name)
		if code != 0 || !strings.Contains(out, "Usage: latch "+c.name) {
			t.Errorf("latch help %s: exit %d, output %q", c.name, code, out)
		}
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		g := defaultGlobals()
		g.register(fs)
		c.setup(fs)
		fs.VisitAll(func(f *flag.Flag) {
			if f.Usage == "" {
				t.Errorf("%s --%s has no help text", c.name, f.Name)
			}
			if !strings.Contains(out, "-"+f.Name) {
				t.Errorf("latch help %s does not show --%s", c.name, f.Name)
			}
		})
	}
}

func TestUsageErrorsExitOneWithOneLine(t *testing.T) {
	for _, args := range [][]string{
		{"nosuchcommand"},
		{"get"},                // missing PATH
		{"set", "/a"},          // missing DATA
		{"get", "/a", "extra"}, // too many
		{"-o", "yaml", "get", "/a"},
		{"get", "--no-such-flag", "/a"},
		{},
	} {
		code, out, errOut := runCLI(args...)
		if code != 1 {
			t.Errorf("%v: exit %d, want 1", args, code)
		}
		if out != "" {
			t.Errorf("%v: wrote %q to stdout", args, out)
		}
		if !strings.Contains(errOut, "latch") {
			t.Errorf("%v: stderr %q does not explain", args, errOut)
		}
	}
}

func TestUnreachableEndpointFailsWithinTimeout(t *testing.T) {
	// Nothing listens on this UDP port: Dial must give up at --timeout
	// and say what it tried, in one line.
	code, _, errOut := runCLI("--endpoints", "127.0.0.1:9", "--timeout", "300ms", "get", "/a")
	if code != 1 {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "latch: ") {
		t.Fatalf("stderr %q: want one line starting with latch:", errOut)
	}
}
