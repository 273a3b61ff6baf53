package servertest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/servertest"
)

// On the in-memory network a cut holds: the isolated leader steps down,
// the majority elects another and commits without it, and once healed the
// old leader catches up. A Partition that did not cut would keep the old
// leader leading or let it apply the majority's write.
func TestInMemoryPartitionIsolatesLeader(t *testing.T) {
	c := servertest.StartCluster(t, 3, &servertest.Options{InMemory: true})
	old := c.WaitLeader()
	others := []int{(old + 1) % 3, (old + 2) % 3}
	c.Partition([]int{old}, others)
	newLeader := -1
	servertest.Eventually(t, "the majority elects a leader", func() error {
		for _, i := range others {
			if c.Server(i).IsLeader() {
				newLeader = i
				return nil
			}
		}
		return fmt.Errorf("neither n%d nor n%d leads", others[0]+1, others[1]+1)
	})
	servertest.Eventually(t, "the isolated leader steps down", func() error {
		if c.Server(old).IsLeader() {
			return fmt.Errorf("n%d still leads", old+1)
		}
		return nil
	})
	res, err := c.Server(newLeader).Propose(context.Background(), &namespace.Command{Op: namespace.OpCreate, Path: "/cut"})
	if err != nil || res.Err != nil {
		t.Fatalf("propose in the majority: %v %v", err, res)
	}
	if _, _, err := c.Server(old).Store().Get("/cut"); err == nil {
		t.Fatal("the isolated member applied a write of the majority")
	}
	c.Heal()
	c.WaitApplied(res.Index)
	if _, _, err := c.Server(old).Store().Get("/cut"); err != nil {
		t.Fatalf("the healed member lacks the majority's write: %v", err)
	}
	// A stopped member's address refuses: the survivors' crash detector
	// elects at once, and the member comes back on the same address.
	l := c.WaitLeader()
	c.Stop(l)
	c.WaitLeader()
	c.Restart(l)
	c.WaitLeader()
	c.WaitApplied(c.Propose(context.Background(), &namespace.Command{Op: namespace.OpCreate, Path: "/back"}).Index)
}
