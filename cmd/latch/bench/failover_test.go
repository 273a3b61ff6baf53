package bench

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/latch-io/latch/server/proc"
)

// TestFailoverKeepsLocks kills (then stops, then cuts off from the other
// members' raft traffic) the leader of three latchd processes five times while a holder and eight queued waiters use one
// lock. RunFailover fails the run when any call (each with a 10s ctx,
// the holder's Unlock included) fails, a waiter is granted out of FIFO
// order, a fencing token does not increase, or a session ended, as the
// client sees it or on the new leader. No timing is asserted.
func TestFailoverKeepsLocks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts latchd processes")
	}
	for _, fc := range []FailoverConfig{{Signal: syscall.SIGKILL}, {Signal: syscall.SIGSTOP}, {Partition: true}} {
		t.Run(fc.withDefaults().fault(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			fc.Members, fc.Rounds, fc.Waiters = 3, 5, 8
			fc.LatchdBin, fc.Dir, fc.OpTimeout = proc.Build(t), t.TempDir(), 10*time.Second
			rep, err := RunFailover(ctx, fc)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Rounds) != 5 {
				t.Fatalf("%d rounds, want 5", len(rep.Rounds))
			}
			for i, rd := range rep.Rounds {
				if rd.NewLeader == "" || rd.NewLeader == rd.Killed {
					t.Errorf("round %d: killed %s, new leader %q", i+1, rd.Killed, rd.NewLeader)
				}
			}
		})
	}
}
