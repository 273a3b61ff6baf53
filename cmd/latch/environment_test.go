package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestGlobalsFromConfigFileThenEnvironmentThenFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(path, []byte(`{"endpoints": ["10.0.0.1:7420", "10.0.0.2:7420"], "ca": "/file/ca.pem",
		"timeout": "3s", "output": "json", "admin": "10.0.0.1:7422"}`), 0o600)
	env := map[string]string{"LATCH_CONFIG": path, "LATCH_CA": "/env/ca.pem", "LATCH_SESSION_TTL": "20s"}
	g := defaultGlobals()
	fs := flag.NewFlagSet("latch", flag.ContinueOnError)
	g.register(fs)
	if err := applyDefaults(fs, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if err := fs.Parse([]string{"--timeout", "7s"}); err != nil {
		t.Fatal(err)
	}
	if g.endpoints != "10.0.0.1:7420,10.0.0.2:7420" || g.ca != "/env/ca.pem" || g.timeout != 7*time.Second ||
		g.sessionTTL != 20*time.Second || g.output != "json" || g.admin != "10.0.0.1:7422" {
		t.Fatalf("globals = %+v", g)
	}

	for _, bad := range []struct {
		env  map[string]string
		file string
		want string
	}{
		{map[string]string{"LATCH_TIMEOUT": "soon"}, "", "LATCH_TIMEOUT"},
		{map[string]string{"LATCH_CONFIG": path}, `{"colour": "red"}`, `unknown key "colour"`},
		{map[string]string{"LATCH_CONFIG": path}, `{"timeout": 3}`, `a number given for a duration`},
		{map[string]string{"LATCH_CONFIG": path}, `{"endpoints": [1]}`, "item 0 is not a string"},
		{map[string]string{"LATCH_CONFIG": filepath.Join(t.TempDir(), "missing.json")}, "", "no such file"},
	} {
		if bad.file != "" {
			os.WriteFile(path, []byte(bad.file), 0o600)
		}
		g := defaultGlobals()
		fs := flag.NewFlagSet("latch", flag.ContinueOnError)
		g.register(fs)
		err := applyDefaults(fs, func(k string) string { return bad.env[k] })
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v %s: %v, want an error naming %q", bad.env, bad.file, err, bad.want)
		}
	}
}

// TestHelpFlagPrintsToStdout: `latch CMD --help` is `latch help CMD`.
func TestHelpFlagPrintsToStdout(t *testing.T) {
	_, want, _ := runCLI("help", "lock")
	code, out, errOut := runCLI("lock", "--help")
	if code != 0 || errOut != "" || out != want {
		t.Fatalf("lock --help: exit %d, stderr %q, stdout differs from latch help lock: %q", code, errOut, out)
	}
	code, out, errOut = runCLI("-h")
	if code != 0 || errOut != "" || !strings.Contains(out, "LATCH_ENDPOINTS") {
		t.Fatalf("-h: exit %d, stderr %q, stdout %q", code, errOut, out)
	}
	code, out, _ = runCLI("version")
	if code != 0 || !strings.HasPrefix(out, "latch ") || !strings.Contains(out, "go1.") {
		t.Fatalf("version: exit %d, %q", code, out)
	}
}
