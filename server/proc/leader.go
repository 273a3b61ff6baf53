package proc

import (
	"errors"
	"fmt"
	"time"

	"github.com/latch-io/latch/server/adminapi"
)

// LeaderRule says what Leader requires of the members besides that exactly
// one running, unpaused member reports itself the ready leader. Two
// members that both say so are never "the" leader: a failover is not over
// while the old leader still claims to be one.
type LeaderRule int

const (
	// Claimed asks nothing more: members that do not answer are passed
	// over and the others are not asked whom they follow. A failover
	// measures with it, while the old leader may be cut off and follow
	// no one.
	Claimed LeaderRule = iota
	// Followed also requires every member that answers to name the
	// leader; members that do not answer are passed over (a member that
	// is starting or dying). What tests wait for (WaitLeader).
	Followed
	// Settled requires every running, unpaused member to answer, to be
	// ready (/readyz) and to follow the leader: a cluster to start a
	// fault, a round or a run on.
	Settled
)

// memberView is what one running, unpaused member said.
type memberView struct {
	index int
	st    adminapi.Status
	err   error // of /v1/status; st is unset
	ready error // of /readyz, asked under Settled only
}

// Leader looks once and returns the index of the ready leader that rule
// accepts, or an error saying what is missing.
func (c *Cluster) Leader(rule LeaderRule) (int, error) {
	var views []memberView
	for i, nd := range c.Nodes {
		if !nd.Running() || nd.Paused() {
			continue
		}
		v := memberView{index: i}
		v.st, v.err = nd.Status()
		if v.err != nil {
			v.err = fmt.Errorf("%s: %w", nd.ID, v.err)
		} else if rule == Settled {
			if err := nd.checkEndpoint("/readyz"); err != nil {
				v.ready = fmt.Errorf("%s not ready: %w", nd.ID, err)
			}
		}
		views = append(views, v)
	}
	return pickLeader(views, rule)
}

// pickLeader is Leader's verdict on what the members said.
func pickLeader(views []memberView, rule LeaderRule) (int, error) {
	leader, id := -1, ""
	for _, v := range views {
		if v.err != nil {
			if rule == Settled {
				return -1, v.err
			}
			continue
		}
		if v.ready != nil && rule == Settled {
			return -1, v.ready
		}
		if v.st.State == "Leader" && v.st.Ready {
			if leader >= 0 {
				return -1, fmt.Errorf("two ready leaders: %s and %s", id, v.st.ID)
			}
			leader, id = v.index, v.st.ID
		}
	}
	if leader < 0 {
		return -1, errors.New("no ready leader")
	}
	if rule == Claimed {
		return leader, nil
	}
	for _, v := range views {
		if v.err == nil && v.st.LeaderID != id {
			return -1, fmt.Errorf("%s follows %q, not %q", v.st.ID, v.st.LeaderID, id)
		}
	}
	return leader, nil
}

// AwaitLeader polls Leader(rule) until it names a leader or timeout
// passes, then returns its last error.
func (c *Cluster) AwaitLeader(rule LeaderRule, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		i, err := c.Leader(rule)
		if err == nil {
			return i, nil
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("proc: no settled leader after %v: %w", timeout, err)
		}
		time.Sleep(20 * time.Millisecond) // polling interval of a condition with a deadline
	}
}
