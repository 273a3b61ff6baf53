package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/server/proc"
)

// TestStatusWithAMemberDown runs latch status against three real latchd
// processes, one of them stopped with SIGSTOP (it holds its port but never
// answers): the stopped member is a clean "down" row, asked within
// --member-timeout, while the others report their state and version. The
// endpoints and CA come from the environment.
func TestStatusWithAMemberDown(t *testing.T) {
	c := proc.StartCluster(t, 3)
	leader := c.WaitLeader(t)
	down := (leader + 1) % 3
	t.Setenv("LATCH_ENDPOINTS", c.Nodes[leader].ClientAddr)
	t.Setenv("LATCH_CA", c.Certs.CA)
	waitMembersPublished(t, 3)
	c.Nodes[down].Pause(t)
	defer c.Nodes[down].Resume(t)

	start := time.Now()
	code, out, errOut := runCLI("status", "--member-timeout", "300ms", "--timeout", "20s")
	took := time.Since(start)
	if code != 0 {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	var rows int
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || !strings.HasPrefix(f[0], "n") {
			continue
		}
		rows++
		if f[0] == c.Nodes[down].ID {
			if f[2] != "down" || strings.Contains(line, "timeout") || strings.Contains(line, "deadline") {
				t.Errorf("stopped member's row %q: want a clean down cell", line)
			}
			continue
		}
		if f[2] != "ok" || !strings.Contains(line, "go1.") {
			t.Errorf("row %q: want ok and a version", line)
		}
	}
	if rows != 3 {
		t.Fatalf("status printed %d member rows:\n%s", rows, out)
	}
	t.Logf("status with one member stopped took %v", took)

	code, out, errOut = runCLI("status", "-o", "json", "--member-timeout", "300ms")
	if code != 0 {
		t.Fatalf("status -o json: exit %d: %s", code, errOut)
	}
	var doc struct {
		Members []health `json:"members"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	for _, h := range doc.Members {
		if h.ID == c.Nodes[down].ID && (h.Health != "down" || h.Error == "") {
			t.Errorf("json row of the stopped member: %+v, want down with the reason", h)
		}
	}

	code, out, errOut = runCLI("version", "--members", "--member-timeout", "300ms")
	if code != 0 || strings.Count(out, "go1.") != 3 || !strings.Contains(out, "down") {
		t.Fatalf("version --members: exit %d, %q %s", code, out, errOut)
	}
}

// waitMembersPublished waits until `latch members` (with the environment's
// endpoints) lists n members that each published a client address.
func waitMembersPublished(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(proc.WaitTimeout)
	for {
		code, out, errOut := runCLI("members", "-o", "json")
		var ms []memberJSON
		published := 0
		if code == 0 && json.Unmarshal([]byte(out), &ms) == nil {
			for _, m := range ms {
				if m.ClientAddr != "" {
					published++
				}
			}
		}
		if len(ms) == n && published == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("members never all published: exit %d %s %s", code, out, errOut)
		}
		time.Sleep(50 * time.Millisecond) // polling interval of a condition with a deadline
	}
}
