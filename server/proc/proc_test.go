package proc_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/latch-io/latch/server/proc"
)

func TestMain(m *testing.M) {
	code := m.Run()
	proc.RemoveBuild()
	os.Exit(code)
}

func TestKillLeaderAndRejoin(t *testing.T) {
	c := proc.StartCluster(t, 3)
	old := c.WaitLeader(t)
	for _, n := range c.Nodes {
		n.WaitReady(t)
	}
	before, err := c.Nodes[old].Status()
	if err != nil {
		t.Fatal(err)
	}
	if len(before.Members) != 3 {
		t.Fatalf("members = %+v", before.Members)
	}

	c.Nodes[old].Kill(t)
	if c.Nodes[old].Running() {
		t.Fatal("killed member still running")
	}
	leader := c.WaitLeader(t)
	if leader == old {
		t.Fatalf("killed member %s still leader", c.Nodes[old].ID)
	}
	after, err := c.Nodes[leader].Status()
	if err != nil {
		t.Fatal(err)
	}
	if after.Term <= before.Term {
		t.Fatalf("new leader term %d not after %d", after.Term, before.Term)
	}

	c.Nodes[old].Restart(t)
	c.Nodes[old].WaitReady(t)
	leader = c.WaitLeader(t)
	st, err := c.Nodes[old].Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.LeaderID != c.Nodes[leader].ID || st.AppliedIndex < before.AppliedIndex {
		t.Fatalf("restarted member status %+v; want leader %s and applied >= %d", st, c.Nodes[leader].ID, before.AppliedIndex)
	}
	if !strings.Contains(c.Nodes[old].Logs(), "existing_state=true") {
		t.Fatalf("restarted member did not reuse its raft state")
	}
}

func TestPauseAndResume(t *testing.T) {
	c := proc.StartCluster(t, 3)
	old := c.WaitLeader(t)
	c.Nodes[old].Pause(t)
	// A paused leader stops heartbeating: the others elect a new one.
	leader := c.WaitLeader(t)
	if leader == old {
		t.Fatalf("paused member still leader")
	}
	c.Nodes[old].Resume(t)
	// Until its timers run, the resumed member still believes it leads
	// (raft steps it down on the new term or its lapsed lease); it must
	// then follow another member.
	proc.Eventually(t, "resumed old leader follows", func() error {
		st, err := c.Nodes[old].Status()
		if err != nil {
			return err
		}
		if st.State != "Follower" || st.LeaderID == "" || st.LeaderID == c.Nodes[old].ID {
			return fmt.Errorf("state %s, leader %s, term %d", st.State, st.LeaderID, st.Term)
		}
		return nil
	})
	if code := c.Nodes[old].Stop(t); code != 0 {
		t.Fatalf("SIGTERM exit code %d", code)
	}
}
