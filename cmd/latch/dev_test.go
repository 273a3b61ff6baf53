package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/latch-io/latch/server/proc"
)

// Dev clients do not share one identity: next to `latchd --dev` (a real
// process), the CLI run by two OS users presents two certificates the dev
// CA issued for dev-<user>, and the server records those identities on
// their sessions. The library itself never looks at latch-data.
func TestDevClientsHaveTheirOwnIdentity(t *testing.T) {
	work := t.TempDir()
	n := proc.StartNode(t, proc.Options{DataDir: filepath.Join(work, "latch-data"), Args: []string{"--dev"}})
	n.WaitReady(t)
	t.Chdir(work)
	t.Setenv("LATCH_ENDPOINTS", n.ClientAddr)
	for _, user := range []string{"alice", "bob"} {
		t.Setenv("USER", user)
		code, out, errOut := runCLI("sessions", "-o", "json")
		if code != 0 {
			t.Fatalf("latch sessions as %s: exit %d: %s", user, code, errOut)
		}
		var rows []struct {
			Identity    string `json:"identity"`
			ThisCommand bool   `json:"this_command"`
		}
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		found := false
		for _, r := range rows {
			if r.ThisCommand {
				found = true
				if r.Identity != "dev-"+user {
					t.Errorf("%s's session has identity %q, want dev-%s", user, r.Identity, user)
				}
			}
		}
		if !found {
			t.Fatalf("no session of this command in %s", out)
		}
		fi, err := os.Stat(filepath.Join(work, "latch-data", "tls", "clients", "dev-"+user+"-key.pem"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("dev-%s key: %v %v", user, err, fi)
		}
	}
}
