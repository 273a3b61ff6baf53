package client

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/latch-io/latch/session"
)

// TestAdminDeleteIsAnExpiry: an admin may delete another session's lock,
// election and semaphore nodes; the holder then loses them as on expiry:
// Lost fires, and the lock stays ungranted for its lock-delay. A session
// that is not an admin may not (TestACLAttacksRefused has the attacks).
func TestAdminDeleteIsAnExpiry(t *testing.T) {
	const delay = 700 * time.Millisecond
	clock := session.NewManualClock(time.Now()) // the lock-delay is not waited out
	tc := startCluster(t, 1, clusterOptions{admins: []string{""}, lockDelay: delay, inMemory: true, clock: clock})
	holder, admin := tc.dial(5*time.Second), tc.dial(5*time.Second)
	ctx := testCtx(t)
	waitEnforced(t, admin)

	m := NewMutex(holder.Session(), "/a/job")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	node := m.h.nodeName()
	waiter := NewMutex(admin.Session(), "/a/job")
	wl := lockAsync(ctx, waiter.Lock)
	waitQueue(t, admin, "/a/job", "waiter queued", queueShape(true, false))
	if err := admin.Delete(ctx, node); err != nil {
		t.Fatal(err)
	}
	wait(t, "mutex Lost after an admin deleted its node", m.Lost())
	if !errors.Is(m.Err(), ErrLockLost) {
		t.Fatalf("Err = %v, want ErrLockLost", m.Err())
	}
	// As after an expiry, the lock stays a phantom for the lock-delay:
	// the waiter waits while the clock stands still.
	q := waitQueue(t, admin, "/a/job", "the deleted holder turned phantom", func(q []LockInfo) error {
		if len(q) != 2 || !q[0].Phantom {
			return fmt.Errorf("queue %+v", q)
		}
		return nil
	})
	notDone(t, wl, "waiter during the lock-delay")
	// The cluster's time is the test clock's reading (it feeds both the
	// servers' wall and monotonic clocks), which has not moved.
	if got := time.Duration(q[0].DelayEnd - clock.Now().UnixNano()); got < delay {
		t.Fatalf("lock-delay ends %v after the delete, want %v", got, delay)
	}
	clock.Advance(delay)
	done(t, wl, "waiter after the lock-delay")
	if info := waitQueue(t, admin, "/a/job", "the waiter holds", queueShape(true))[0]; info.GrantTime < q[0].DelayEnd {
		t.Fatalf("next waiter granted at %d, before the lock-delay ended at %d", info.GrantTime, q[0].DelayEnd)
	}

	e := NewElection(holder.Session(), "/a/elect")
	if err := e.Campaign(ctx, []byte("holder")); err != nil {
		t.Fatal(err)
	}
	if err := admin.Delete(ctx, e.handle().nodeName()); err != nil {
		t.Fatal(err)
	}
	wait(t, "election Lost after an admin deleted its node", e.Lost())

	sem := NewSemaphore(holder.Session(), "/a/sem", 1)
	if err := sem.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sem.Lost():
		t.Fatal("semaphore Lost before anything happened")
	default:
	}
	if err := admin.Delete(ctx, sem.Node()); err != nil {
		t.Fatal(err)
	}
	wait(t, "semaphore Lost after an admin deleted its node", sem.Lost())

	// A release is not a loss.
	sem2 := NewSemaphore(holder.Session(), "/a/sem2", 1)
	if err := sem2.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	lost := sem2.Lost()
	if err := sem2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
		t.Fatal("semaphore Lost after its own Release")
	case <-time.After(200 * time.Millisecond):
	}
}
