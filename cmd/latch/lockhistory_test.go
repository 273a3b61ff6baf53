package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// TestLocksHistory runs latch lock twice and kills a third latch lock
// holder (its session expires) against a real member, then reads latch locks --history: every
// grant and end, newest first, with tokens that pair each end with its
// grant.
func TestLocksHistory(t *testing.T) {
	c := proc.StartCluster(t, 1, "--lock-delay", "0s")
	c.WaitLeader(t)
	useCluster(t, c)
	for range 2 {
		if code, _, errOut := runCLI("lock", "/jobs/h", "--", "true"); code != 0 {
			t.Fatalf("latch lock: exit %d: %s", code, errOut)
		}
	}
	// A holder process killed with SIGKILL: its session expires.
	holder := exec.Command(os.Args[0], "--session-ttl", "1s", "lock", "/jobs/h", "--", "sh", "-c", "echo $LATCH_FENCING_TOKEN; exec sleep 60")
	holder.Env = append(os.Environ(), cliChildEnv+"=1")
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	var token uint64
	if _, err := fmt.Fscan(bufio.NewReader(stdout), &token); err != nil {
		t.Fatalf("holder said no token: %v", err)
	}
	holder.Process.Signal(syscall.SIGKILL)

	var evs []client.LockEvent
	waitFor(t, "the orphaned holder's expiry in the history", func() bool {
		code, out, _ := runCLI("locks", "--history", "/jobs/h", "-o", "json")
		evs = nil
		return code == 0 && json.Unmarshal([]byte(out), &evs) == nil && len(evs) == 6
	})
	want := []string{"session-expired", "granted", "released", "granted", "released", "granted"}
	for i, ev := range evs {
		if ev.Event != want[i] || ev.Path != "/jobs/h" || ev.Token == 0 {
			t.Fatalf("record %d: %+v, want %s", i, ev, want[i])
		}
		if i%2 == 0 && (evs[i+1].Token != ev.Token || evs[i+1].Session != ev.Session || ev.Time < ev.GrantTime) {
			t.Fatalf("end %+v does not pair with grant %+v", ev, evs[i+1])
		}
	}
	if evs[0].Token != token || evs[0].Token <= evs[2].Token {
		t.Fatalf("tokens: newest %d (the killed holder had %d), previous %d", evs[0].Token, token, evs[2].Token)
	}

	code, out, errOut := runCLI("locks", "--history", "-n", "1", "--recursive", "/jobs")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "/jobs/h session-expired") ||
		!strings.Contains(out, "held=") {
		t.Fatalf("locks --history -n 1 --recursive /jobs: exit %d %q %s", code, out, errOut)
	}
	if code, out, _ := runCLI("locks", "--history", "/jobs"); code != 0 || out != "" {
		t.Fatalf("history of /jobs without --recursive: exit %d %q", code, out)
	}

	// The HTTP API serves the same records.
	tlsConf, err := session.ClientTLS(c.Certs.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	tlsConf.NextProtos = nil
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConf}, Timeout: proc.WaitTimeout}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("https://" + c.Nodes[0].APIAddr + "/api/v1/locks/jobs/history?recursive=true&limit=2")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		History []struct {
			Event string `json:"event"`
			Token uint64 `json:"token"`
			Mode  string `json:"mode"`
		} `json:"history"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET .../history: %s %v", resp.Status, err)
	}
	if len(doc.History) != 2 || doc.History[0].Event != "session-expired" || doc.History[0].Token != token ||
		doc.History[1].Event != "granted" || doc.History[0].Mode != "exclusive" {
		t.Fatalf("HTTP API history: %+v", doc.History)
	}
}
