package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/server/proc"
)

// TestMemberLifecycle drives latch member against real latchd processes:
// a learner added with --learner joins without becoming a voter and
// receives the log; promote makes it a voter (four voters: warned);
// remove takes a follower out, and the removed latchd stops itself.
func TestMemberLifecycle(t *testing.T) {
	c := proc.StartCluster(t, 3)
	leader := c.Nodes[c.WaitLeader(t)]
	useCluster(t, c)

	members := func(args ...string) (adminapi.MembersReply, string) {
		t.Helper()
		code, out, errOut := runCLI(append([]string{"member", "-o", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("latch member %v: exit %d: %s", args, code, errOut)
		}
		var r adminapi.MembersReply
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("latch member %v: %v\n%s", args, err, out)
		}
		return r, errOut
	}
	role := func(r adminapi.MembersReply, id string) string {
		for _, m := range r.Members {
			if m.ID == id {
				return memberRole(m)
			}
		}
		return "absent"
	}

	n4args, err := proc.MemberArgs(c.Certs, "n4")
	if err != nil {
		t.Fatal(err)
	}
	n4 := proc.NewNode(t, proc.Options{ID: "n4", Args: append([]string{"--join", leader.HTTPAddr}, n4args...)})
	admin, err := proc.AdminTLS(c.Certs)
	if err != nil {
		t.Fatal(err)
	}
	n4.SetAdminTLS(admin)
	r, warn := members("add", "--learner", "n4", n4.RaftAddr)
	if role(r, "n4") != "learner" || warn != "" {
		t.Fatalf("after add --learner: n4 is %s, warning %q", role(r, "n4"), warn)
	}
	if code, _, errOut := runCLI("create", "/before-start", "x"); code != 0 {
		t.Fatalf("create: %s", errOut)
	}
	n4.Start(t)
	n4.WaitHealthy(t)
	// The learner catches up (it receives the log) and its own --join
	// does not make it a voter.
	deadline := time.Now().Add(proc.WaitTimeout)
	for {
		ls, err1 := leader.Status()
		st, err2 := n4.Status()
		if err1 == nil && err2 == nil && st.LeaderID == ls.ID && st.AppliedIndex >= ls.CommitIndex && st.AppliedIndex > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("learner never caught up: %+v %v / %+v %v", st, err2, ls, err1)
		}
		time.Sleep(50 * time.Millisecond) // polling interval of a condition with a deadline
	}
	waitMembersPublished(t, 4)
	if r, _ := members("list"); role(r, "n4") != "learner" {
		t.Fatalf("n4's join changed its role to %s", role(r, "n4"))
	}
	code, out, _ := runCLI("member", "list")
	if code != 0 || !strings.Contains(out, "learner") || !strings.Contains(out, "ROLE") {
		t.Fatalf("member list table: %d %q", code, out)
	}

	r, warn = members("promote", "n4")
	if role(r, "n4") != "voter" || !strings.Contains(warn, "4 voters") {
		t.Fatalf("after promote: n4 is %s, warning %q", role(r, "n4"), warn)
	}
	if code, _, errOut := runCLI("member", "promote", "n9"); code != 1 || !strings.Contains(errOut, "no_member") {
		t.Fatalf("promote of an unknown member: exit %d %q", code, errOut)
	}

	var gone *proc.Node
	for _, nd := range c.Nodes {
		if nd != leader {
			gone = nd
			break
		}
	}
	r, warn = members("remove", gone.ID)
	if role(r, gone.ID) != "absent" || warn != "" || len(r.Members) != 3 {
		t.Fatalf("after remove %s: %+v, warning %q", gone.ID, r.Members, warn)
	}
	code, err = gone.WaitExit(proc.WaitTimeout)
	if err != nil {
		t.Fatalf("removed member %s still runs: %v\n%s", gone.ID, err, gone.Logs())
	}
	t.Logf("removed member: %s", lastLine(gone.Logs(), "this member was removed from the cluster (latch"))
	if code != 0 || !strings.Contains(gone.Logs(), "removed from the cluster") {
		t.Fatalf("removed member exited %d without saying it was removed:\n%s", code, gone.Logs())
	}
}

// lastLine returns the last line of logs that contains s.
func lastLine(logs, s string) string {
	lines := strings.Split(logs, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], s) {
			return lines[i]
		}
	}
	return ""
}
