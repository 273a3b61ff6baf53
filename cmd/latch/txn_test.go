package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latch-io/latch/server/proc"
)

// TestTxnCommand runs latch txn against a real latchd in its text and
// JSON forms: both branches, the output of each, and a failing branch.
func TestTxnCommand(t *testing.T) {
	c := proc.StartCluster(t, 1)
	c.WaitLeader(t)
	useCluster(t, c)
	dir := t.TempDir()
	txn := func(name, src string, args ...string) (int, string, string) {
		t.Helper()
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return runCLI(append([]string{"txn", "--file", f}, args...)...)
	}
	createOrGet := `# create if absent, else read it
if exists /cfg = 0
then
create /cfg "blue sky"
else
get /cfg
`
	if code, out, errOut := txn("a.txt", createOrGet); code != 0 || out != "then\n[0] create /cfg version 0\n" {
		t.Fatalf("first run: exit %d %q %s", code, out, errOut)
	}
	if code, out, errOut := txn("a.txt", createOrGet); code != 0 || out != "else\n[0] get /cfg version 0: blue sky\n" {
		t.Fatalf("second run: exit %d %q %s", code, out, errOut)
	}
	// JSON form, JSON output: a compare-and-set.
	cas := `{"if": [{"target": "value", "path": "/cfg", "cmp": "=", "data": "blue sky"},
	                {"target": "version", "path": "/cfg", "cmp": "<", "number": 1}],
	         "then": [{"op": "set", "path": "/cfg", "data": "green"}, {"op": "get", "path": "/cfg"}]}`
	code, out, errOut := txn("cas.json", cas, "-o", "json")
	var got struct {
		Branch  string `json:"branch"`
		Results []struct {
			Op   string `json:"op"`
			Data string `json:"data"`
			Stat struct {
				Version int64 `json:"version"`
			} `json:"stat"`
		} `json:"results"`
		Revision uint64 `json:"revision"`
	}
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("cas: exit %d %v %q %s", code, err, out, errOut)
	}
	if got.Branch != "then" || len(got.Results) != 2 || got.Results[1].Data != "green" || got.Results[1].Stat.Version != 1 || got.Revision == 0 {
		t.Fatalf("cas answer %+v", got)
	}
	if code, out, _ := txn("cas.json", cas); code != 0 || out != "else\n" {
		t.Fatalf("stale cas: exit %d %q", code, out)
	}
	// A failing op: non-zero exit, the op named, nothing applied.
	code, out, errOut = txn("bad.txt", "if value /cfg = green\nthen\ncreate /cfg/x\ncreate /cfg\n")
	if code == 0 || !strings.Contains(out, "[1] create /cfg: latch: node exists") || !strings.Contains(errOut, "node exists") {
		t.Fatalf("failing txn: exit %d %q %s", code, out, errOut)
	}
	if code, _, _ := runCLI("get", "/cfg/x"); code == 0 {
		t.Fatal("a failed txn created /cfg/x")
	}
	// Bad input is a usage error naming the line.
	for src, want := range map[string]string{
		"then\nrename /a\n":       `"rename" is not create`,
		"if size /a = 1\n":        `target "size"`,
		"get /a\n":                "an op before then or else",
		"if exists /a > 0\n":      "= or != only",
		`{"if": [{"target": 1}]}`: "JSON",
		"if version /a = x\n":     "compares with a number",
	} {
		if code, _, errOut := txn("u.txt", src); code == 0 || !strings.Contains(errOut, want) {
			t.Errorf("%q: exit %d %s, want %q", src, code, errOut, want)
		}
	}
}
