package proc

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/server/adminapi"
)

// TestPickLeader: the one leader rule of the harness, chaos and the
// failover bench, on what members might say. The three used to differ:
// the failover bench took the last of two ready leaders and chaos failed
// on a member that did not answer where tests passed it over; now two
// ready leaders are never a leader, and only Settled asks every member.
func TestPickLeader(t *testing.T) {
	leader := func(i int, id string) memberView {
		return memberView{index: i, st: adminapi.Status{ID: id, State: "Leader", Ready: true, LeaderID: id}}
	}
	follower := func(i int, id, of string) memberView {
		return memberView{index: i, st: adminapi.Status{ID: id, State: "Follower", Ready: true, LeaderID: of}}
	}
	silent := memberView{index: 2, err: errors.New("n3: connection refused")}
	cutOff := memberView{index: 0, st: adminapi.Status{ID: "n1", State: "Candidate"}}
	notReady := follower(2, "n3", "n2")
	notReady.ready = errors.New("n3 not ready: 503")
	for _, tc := range []struct {
		name  string
		views []memberView
		want  [3]string // Claimed, Followed, Settled: "1" is the index, else a part of the error
	}{
		{"one leader, all follow", []memberView{follower(0, "n1", "n2"), leader(1, "n2"), follower(2, "n3", "n2")}, [3]string{"1", "1", "1"}},
		{"two ready leaders", []memberView{leader(0, "n1"), leader(1, "n2"), follower(2, "n3", "n2")},
			[3]string{"two ready leaders", "two ready leaders", "two ready leaders"}},
		{"no leader", []memberView{follower(0, "n1", ""), follower(1, "n2", "")}, [3]string{"no ready leader", "no ready leader", "no ready leader"}},
		{"a member does not answer", []memberView{follower(0, "n1", "n2"), leader(1, "n2"), silent}, [3]string{"1", "1", "connection refused"}},
		{"the old leader is cut off", []memberView{cutOff, leader(1, "n2"), follower(2, "n3", "n2")}, [3]string{"1", `n1 follows ""`, `n1 follows ""`}},
		{"a member is not ready", []memberView{follower(0, "n1", "n2"), leader(1, "n2"), notReady}, [3]string{"1", "1", "not ready"}},
	} {
		for rule, want := range tc.want {
			i, err := pickLeader(tc.views, LeaderRule(rule))
			if want == "1" {
				if err != nil || i != 1 {
					t.Errorf("%s, rule %d: %d, %v; want member 1", tc.name, rule, i, err)
				}
			} else if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s, rule %d: %d, %v; want an error naming %q", tc.name, rule, i, err, want)
			}
		}
	}
}

// TestRebind: a start that fails while a port is still held is tried
// again until it works, and the last error comes back when it never does.
func TestRebind(t *testing.T) {
	busy := errors.New("address already in use")
	tries := 0
	if err := Rebind(time.Minute, func() error {
		if tries++; tries < 3 {
			return busy
		}
		return nil
	}); err != nil || tries != 3 {
		t.Fatalf("Rebind: %v after %d tries; want success on the third", err, tries)
	}
	tries = 0
	if err := Rebind(0, func() error { tries++; return busy }); !errors.Is(err, busy) || tries != 1 {
		t.Fatalf("Rebind that never binds: %v after %d tries", err, tries)
	}
}
