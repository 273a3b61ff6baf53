package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// TestACLCommand drives latch acl against a real latchd with mutual TLS
// (so the default is deny) whose admin is acl-admin.
func TestACLCommand(t *testing.T) {
	certs, err := session.EnsureDevCerts(filepath.Join(t.TempDir(), "tls"))
	if err != nil {
		t.Fatal(err)
	}
	const admin = "acl-admin"
	adminCert, adminKey, err := certs.Client(admin)
	if err != nil {
		t.Fatal(err)
	}
	n := proc.NewNode(t, proc.Options{ID: "n1"})
	member, err := proc.MemberArgs(certs, "n1")
	if err != nil {
		t.Fatal(err)
	}
	n.Args = append(append([]string{"--bootstrap", "n1=" + n.RaftAddr}, member...), "--tls-client-ca", certs.CA, "--admins", admin)
	adminTLS, err := proc.AdminTLS(certs)
	if err != nil {
		t.Fatal(err)
	}
	n.SetAdminTLS(adminTLS)
	n.Start(t)
	n.WaitReady(t)
	t.Setenv("LATCH_ENDPOINTS", n.ClientAddr)
	t.Setenv("LATCH_CA", certs.CA)
	t.Setenv("LATCH_CERT", adminCert)
	t.Setenv("LATCH_KEY", adminKey)

	type listing struct {
		Enforced bool   `json:"enforced"`
		Default  string `json:"default"`
		Rules    []struct {
			Identity, Prefix, Rights string
		} `json:"rules"`
	}
	list := func() listing {
		t.Helper()
		code, out, errOut := runCLI("acl", "list", "-o", "json")
		if code != 0 {
			t.Fatalf("acl list: exit %d: %s", code, errOut)
		}
		var l listing
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return l
	}
	mustRun := func(args ...string) {
		t.Helper()
		if code, _, errOut := runCLI(args...); code != 0 {
			t.Fatalf("latch %v: exit %d: %s", args, code, errOut)
		}
	}
	// The leader bootstraps the rules just after it becomes ready.
	var l listing
	for range 100 {
		if l = list(); l.Enforced {
			break
		}
	}
	if !l.Enforced || l.Default != "none" || len(l.Rules) != 1 || l.Rules[0].Identity != admin ||
		l.Rules[0].Prefix != "/" || l.Rules[0].Rights != "rwcda" {
		t.Fatalf("bootstrapped rules: %+v", l)
	}

	mustRun("acl", "set", "alice", "/jobs", "rwcd")
	rules := filepath.Join(t.TempDir(), "rules.txt")
	if err := os.WriteFile(rules, []byte("# team\n* /public r\n\"\" /public none\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustRun("acl", "apply", rules)
	mustRun("acl", "rm", "alice", "/jobs")
	code, out, _ := runCLI("acl", "list")
	if code != 0 || !strings.Contains(out, "*  ") || !strings.Contains(out, `""`) || strings.Contains(out, "alice") {
		t.Fatalf("acl list after changes (exit %d):\n%s", code, out)
	}
	if got := list(); len(got.Rules) != 3 {
		t.Fatalf("rules: %+v", got.Rules)
	}

	for _, bad := range [][]string{
		{"acl", "set", "alice", "jobs", "rw"},   // relative prefix
		{"acl", "set", "alice", "/jobs", "rwx"}, // unknown right
		{"acl", "rm", "nobody", "/nothing"},     // no such rule
		{"acl", "rm", admin, "/"},               // the last admin of /
		{"acl", "frobnicate"},                   // no such subcommand
	} {
		if code, _, errOut := runCLI(bad...); code == 0 || errOut == "" {
			t.Errorf("latch %v: exit %d, stderr %q; want a failure that says why", bad, code, errOut)
		}
	}

	// Without a certificate a client does not even reach a mutual-TLS member.
	t.Setenv("LATCH_CERT", "")
	t.Setenv("LATCH_KEY", "")
	if code, _, _ := runCLI("acl", "list"); code == 0 {
		t.Fatal("a client without a certificate reached a mutual-TLS cluster")
	}
}
