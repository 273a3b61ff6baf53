package main

import (
	"bytes"
	"errors"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/server"
	"github.com/latch-io/latch/server/proc"
)

func TestMain(m *testing.M) {
	code := m.Run()
	proc.RemoveBuild()
	os.Exit(code)
}

// TestDevRestartReusesDataDir runs the real binary: --dev on free ports,
// SIGTERM exits 0, and a second start resumes from the same data.
func TestDevRestartReusesDataDir(t *testing.T) {
	n := proc.NewNode(t, proc.Options{Args: []string{"--dev", "--log-format", "json"}})
	n.Start(t)
	n.WaitHealthy(t)
	n.WaitReady(t)
	code, body, err := n.Get("/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	for _, want := range []string{"raft_state_leader", "raft_commitTime", `latch_is_leader{member="dev"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	var first server.Status
	waitStatus(t, n, func(st server.Status) bool {
		first = st
		return st.ID == server.DevID && st.Ready && len(st.Members) == 1 && st.Members[0].HTTPAddr == n.HTTPAddr
	})
	if code := n.Stop(t); code != 0 {
		t.Fatalf("SIGTERM: exit code %d, want 0\n%s", code, n.Logs())
	}

	n.Restart(t)
	n.WaitReady(t)
	var second server.Status
	waitStatus(t, n, func(st server.Status) bool { second = st; return st.Ready })
	if second.AppliedIndex < first.AppliedIndex || second.Term <= first.Term || second.LastLogIndex <= first.LastLogIndex {
		t.Fatalf("restart did not resume: before %+v after %+v", first, second)
	}
	if strings.Count(n.Logs(), `"existing_state":true`) != 1 {
		t.Fatalf("second start did not find the first one's raft state:\n%s", n.Logs())
	}
	if _, err := os.Stat(filepath.Join(n.DataDir, "raft")); err != nil {
		t.Fatalf("data dir layout: %v", err)
	}
	if code := n.Stop(t); code != 0 {
		t.Fatalf("second SIGTERM: exit code %d", code)
	}
}

func waitStatus(t *testing.T, n *proc.Node, ok func(server.Status) bool) {
	t.Helper()
	deadline := time.Now().Add(proc.WaitTimeout)
	for {
		st, err := n.Status()
		if err == nil && ok(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("status never matched: %+v, %v", st, err)
		}
		time.Sleep(20 * time.Millisecond) // polling interval of a condition with a deadline
	}
}

func parse(t *testing.T, args ...string) (server.Config, error) {
	t.Helper()
	fs := flag.NewFlagSet("latchd", flag.ContinueOnError)
	var o options
	o.register(fs)
	if err := fs.Parse(args); err != nil {
		return server.Config{}, err
	}
	if o.configFile != "" {
		if err := loadConfigFile(fs, o.configFile); err != nil {
			return server.Config{}, err
		}
	}
	return o.serverConfig(nil)
}

func TestFlags(t *testing.T) {
	cfg, err := parse(t, "--dev")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ID != "dev" || cfg.DataDir != DevDataDir || !cfg.Dev || cfg.RaftAddr != "127.0.0.1:7421" ||
		cfg.ClientAddr != "127.0.0.1:7420" || cfg.HTTPAddr != "127.0.0.1:7422" {
		t.Fatalf("--dev config = %+v", cfg)
	}
	cfg, err = parse(t, "--id", "n1", "--data-dir", "/d", "--bootstrap", "n1=10.0.0.1:7421, n2=10.0.0.2:7421",
		"--heartbeat-timeout", "200ms", "--election-timeout", "300ms", "--tls-cert", "/c.pem", "--tls-key", "/k.pem")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Bootstrap) != 2 || cfg.Bootstrap[1] != (server.Peer{ID: "n2", RaftAddr: "10.0.0.2:7421"}) ||
		cfg.LeaderLeaseTimeout != 100*time.Millisecond {
		t.Fatalf("config = %+v", cfg)
	}
	for _, bad := range [][]string{
		{"--id", "n1", "--data-dir", "/d", "--bootstrap", "n1"},
		{"--id", "n1", "--data-dir", "/d", "--bootstrap", "n2=10.0.0.2:7421"},
		{"--data-dir", "/d"},
		{"--dev", "--join", "127.0.0.1:7422"},
	} {
		if _, err := parse(t, bad...); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	var stderr bytes.Buffer
	if code := run([]string{"--log-level", "loud", "--dev"}, &stderr); code != 2 || !strings.Contains(stderr.String(), "--log-level") {
		t.Fatalf("bad --log-level: code %d, %s", code, stderr.String())
	}
	if code := run([]string{"stray"}, &stderr); code != 2 {
		t.Fatalf("stray argument: code %d", code)
	}
}

func TestConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "latchd.json")
	os.WriteFile(path, []byte(`{"id": "n1", "data-dir": "/from-file", "bootstrap": ["n1=10.0.0.1:7421", "n2=10.0.0.2:7421"],
		"http-addr": "10.0.0.1:7422", "snapshot-threshold": 100}`), 0o600)
	cfg, err := parse(t, "--config", path, "--data-dir", "/from-flag", "--tls-cert", "/c.pem", "--tls-key", "/k.pem")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ID != "n1" || cfg.DataDir != "/from-flag" || len(cfg.Bootstrap) != 2 || cfg.HTTPAddr != "10.0.0.1:7422" ||
		cfg.SnapshotThreshold != 100 {
		t.Fatalf("config = %+v", cfg)
	}
	os.WriteFile(path, []byte(`{"id": "n1", "colour": "red"}`), 0o600)
	if _, err := parse(t, "--config", path); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "colour") {
		t.Fatalf("unknown key: %v", err)
	}
}
