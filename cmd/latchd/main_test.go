package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
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
	if first.Version == "" || first.Build.GoVersion == "" || first.Build.Version != first.Version {
		t.Fatalf("/v1/status names no build: version %q build %+v", first.Version, first.Build)
	}
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
	if _, err := os.Stat(filepath.Join(n.DataDir, "raft-wal")); err != nil {
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
		cfg.ClientAddr != "127.0.0.1:7420" || cfg.HTTPAddr != "127.0.0.1:7422" || cfg.APIAddr != "127.0.0.1:7423" {
		t.Fatalf("--dev config = %+v", cfg)
	}
	// The raft timing a user gets without flags is the server's default.
	def := server.DefaultConfig()
	if cfg.HeartbeatTimeout != def.HeartbeatTimeout || cfg.ElectionTimeout != def.ElectionTimeout ||
		cfg.LeaderLeaseTimeout != def.LeaderLeaseTimeout || cfg.CommitTimeout != def.CommitTimeout {
		t.Fatalf("--dev raft timing = %v %v %v %v, want the defaults %v %v %v %v", cfg.HeartbeatTimeout, cfg.ElectionTimeout,
			cfg.LeaderLeaseTimeout, cfg.CommitTimeout, def.HeartbeatTimeout, def.ElectionTimeout, def.LeaderLeaseTimeout, def.CommitTimeout)
	}
	cfg, err = parse(t, "--id", "n1", "--data-dir", "/d", "--bootstrap", "n1=10.0.0.1:7421, n2=10.0.0.2:7421",
		"--heartbeat-timeout", "200ms", "--election-timeout", "300ms", "--cluster-ca", "/ca.pem",
		"--member-cert", "/m.pem", "--member-key", "/mk.pem", "--admins", "ops, alice", "--recover", "n1=10.0.0.1:7421")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Bootstrap) != 2 || cfg.Bootstrap[1] != (server.Peer{ID: "n2", RaftAddr: "10.0.0.2:7421"}) ||
		cfg.LeaderLeaseTimeout != 200*time.Millisecond || cfg.ClusterCA != "/ca.pem" || cfg.MemberCert != "/m.pem" ||
		cfg.MemberKey != "/mk.pem" || len(cfg.Admins) != 2 || cfg.Admins[1] != "alice" || len(cfg.Recover) != 1 {
		t.Fatalf("config = %+v", cfg)
	}
	for _, bad := range [][]string{
		{"--id", "n1", "--data-dir", "/d", "--bootstrap", "n1"},
		{"--id", "n1", "--data-dir", "/d", "--bootstrap", "n2=10.0.0.2:7421"},
		{"--data-dir", "/d"},
		{"--dev", "--join", "127.0.0.1:7422"},
		{"--dev", "--heartbeat-timeout", "100ms", "--leader-lease-timeout", "200ms"},
		{"--dev", "--heartbeat-timeout", "100ms", "--election-timeout", "50ms"},
		{"--id", "n1", "--data-dir", "/d", "--tls-cert", "/c.pem", "--tls-key", "/k.pem"}, // no member certificate
		{"--dev", "--recover", "n1"},
	} {
		if _, err := parse(t, bad...); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	var stderr bytes.Buffer
	if code := run([]string{"--log-level", "loud", "--dev"}, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), "--log-level") {
		t.Fatalf("bad --log-level: code %d, %s", code, stderr.String())
	}
	if code := run([]string{"stray"}, io.Discard, &stderr); code != 2 {
		t.Fatalf("stray argument: code %d", code)
	}
	// -h and --version answer on stdout and exit 0; a backquote in a usage
	// string must not become the flag's argument name.
	var stdout bytes.Buffer
	stderr.Reset()
	if code := run([]string{"-h"}, &stdout, &stderr); code != 0 || stderr.Len() != 0 ||
		!strings.Contains(stdout.String(), "-fault-injection\n") || !strings.Contains(stdout.String(), "-bootstrap string") {
		t.Fatalf("-h: code %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	if code := run([]string{"--version"}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "latchd ") ||
		!strings.Contains(stdout.String(), "go1.") {
		t.Fatalf("--version: code %d, %q", code, stdout.String())
	}
	stderr.Reset()
	if code := run([]string{"--bogus"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "-bogus") {
		t.Fatalf("--bogus: code %d, %q", code, stderr.String())
	}
}

func TestConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "latchd.json")
	os.WriteFile(path, []byte(`{"id": "n1", "data-dir": "/from-file", "bootstrap": ["n1=10.0.0.1:7421", "n2=10.0.0.2:7421"],
		"http-addr": "10.0.0.1:7422", "snapshot-threshold": 100}`), 0o600)
	cfg, err := parse(t, "--config", path, "--data-dir", "/from-flag", "--cluster-ca", "/ca.pem", "--member-cert", "/c.pem", "--member-key", "/k.pem")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ID != "n1" || cfg.DataDir != "/from-flag" || len(cfg.Bootstrap) != 2 || cfg.HTTPAddr != "10.0.0.1:7422" ||
		cfg.SnapshotThreshold != 100 {
		t.Fatalf("config = %+v", cfg)
	}
	// JSON types are kept: a big number is not a float, durations are
	// strings, booleans set booleans.
	os.WriteFile(path, []byte(`{"id": "n1", "data-dir": "/d", "bootstrap": "n1=10.0.0.1:7421", "snapshot-threshold": 1000000,
		"trailing-logs": 20000000, "election-timeout": "2s", "heartbeat-timeout": "1500ms", "fault-injection": true,
		"cluster-ca": "/ca.pem", "member-cert": "/c.pem", "member-key": "/k.pem", "admins": ["ops", "alice"]}`), 0o600)
	cfg, err = parse(t, "--config", path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SnapshotThreshold != 1000000 || cfg.TrailingLogs != 20000000 || cfg.ElectionTimeout != 2*time.Second ||
		cfg.HeartbeatTimeout != 1500*time.Millisecond || !cfg.FaultInjection || len(cfg.Admins) != 2 {
		t.Fatalf("typed config = %+v", cfg)
	}
	for _, bad := range []struct{ json, want string }{
		{`{"election-timeout": 2}`, `want a string such as "500ms"`},
		{`{"dev": "yes"}`, "want true or false"},
		{`{"dev": 1}`, "want true or false"},
		{`{"id": true}`, "true/false given for a string"},
		{`{"snapshot-threshold": 1.5}`, "snapshot-threshold"},
		{`{"bootstrap": ["n1=a:1", 2]}`, "list item 1 is not a string"},
		{`{"id": {"a": 1}}`, "unsupported value"},
	} {
		os.WriteFile(path, []byte(bad.json), 0o600)
		if _, err := parse(t, "--config", path); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error naming %q", bad.json, err, bad.want)
		}
	}
	os.WriteFile(path, []byte(`{"id": "n1", "colour": "red"}`), 0o600)
	if _, err := parse(t, "--config", path); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "colour") {
		t.Fatalf("unknown key: %v", err)
	}
}

// TestDeployConfigs: the example configs of testdata/deploy (the systemd
// set-up the README points to) are configs latchd accepts, each naming its
// own member in the shared bootstrap list.
func TestDeployConfigs(t *testing.T) {
	files, err := filepath.Glob("../../testdata/deploy/n*.json")
	if err != nil || len(files) != 3 {
		t.Fatalf("example configs: %v %v", files, err)
	}
	for _, f := range files {
		cfg, err := parse(t, "--config", f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		id := strings.TrimSuffix(filepath.Base(f), ".json")
		if cfg.ID != id || len(cfg.Bootstrap) != 3 || cfg.Limits.LockHistoryMax != 10000 {
			t.Fatalf("%s: config %+v", f, cfg)
		}
	}
	unit, err := os.ReadFile("../../testdata/deploy/latchd.service")
	if err != nil || !strings.Contains(string(unit), "ExecStart=/usr/local/bin/latchd --config /etc/latch/latchd.json") {
		t.Fatalf("unit: %v", err)
	}
}
