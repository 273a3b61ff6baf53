package bench

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/latch-io/latch/server/proc"
)

// TestFailoverKeepsLocks kills (then stops) the leader of three latchd
// processes five times while a holder and eight queued waiters use one
// lock. RunFailover fails the run when any call (each with a 10s ctx,
// the holder's Unlock included) fails, a waiter is granted out of FIFO
// order, a fencing token does not increase, or a session ended, as the
// client sees it or on the new leader. No timing is asserted.
func TestFailoverKeepsLocks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts latchd processes")
	}
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGSTOP} {
		t.Run(signalName(sig), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			rep, err := RunFailover(ctx, FailoverConfig{Members: 3, Rounds: 5, Waiters: 8, Signal: sig,
				LatchdBin: proc.Build(t), Dir: t.TempDir(), OpTimeout: 10 * time.Second})
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
