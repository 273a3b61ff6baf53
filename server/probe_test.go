package server_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/latch-io/latch/server/servertest"
	"github.com/latch-io/latch/session"
)

// TestProbeNamesOnlyALiveLeader: members answer leader probes on their
// client port. The ready leader says so, followers name its client
// address; once it is stopped (and half a heartbeat timeout passed)
// nobody names it: they answer "no leader" until the new one is elected,
// then name that one.
func TestProbeNamesOnlyALiveLeader(t *testing.T) {
	c := servertest.StartCluster(t, 3, nil)
	leader := c.WaitLeader()
	probe := func(i int) (session.ProbeAnswer, error) {
		return session.Probe(wireCtx(t), c.Server(i).ClientAddr(), 50*time.Millisecond)
	}
	servertest.Eventually(t, "probes agree on the leader", func() error {
		for i := range 3 {
			a, err := probe(i)
			if err != nil {
				return err
			}
			switch {
			case i == leader && !a.IsLeader:
				return fmt.Errorf("leader %d answers %+v", i, a)
			case i != leader && (a.IsLeader || a.Leader != c.Server(leader).ClientAddr()):
				return fmt.Errorf("follower %d answers %+v, leader is at %s", i, a, c.Server(leader).ClientAddr())
			}
		}
		return nil
	})

	dead := c.Server(leader).ClientAddr()
	c.Stop(leader)
	servertest.Eventually(t, "the stopped leader no longer named, a new one leads", func() error {
		found := false
		for i := range 3 {
			if i == leader {
				continue
			}
			a, err := probe(i)
			if err != nil {
				return err
			}
			if a.Leader == dead {
				return fmt.Errorf("member %d still names the stopped leader: %+v", i, a)
			}
			found = found || a.IsLeader
		}
		if !found {
			return errors.New("no member answers that it leads")
		}
		return nil
	})
}
