package client

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/latch-io/latch/server/servertest"
	"github.com/latch-io/latch/session"
)

// TestOrphanKeepsLocks: Orphan leaves a held lock with the session on the
// server. The lock stays held (the waiter behind it is not granted) until
// the server expires the session, a TTL after its last keepalive, and then
// lock-delay applies, as after a crash. Locally the Mutex reports the lock
// lost at once. Server time is a clock the test moves: the TTL and the
// lock-delay are not waited out.
func TestOrphanKeepsLocks(t *testing.T) {
	clock := session.NewManualClock(time.Now())
	tc := startLockClusterWith(t, 1, clock)
	c, other := tc.dial(5*time.Second), tc.dial(5*time.Second)
	ctx := testCtx(t)
	const ttl = 2 * time.Second
	s, err := c.NewSession(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	// A witness orphaned with a shorter TTL: once it is gone, the reaper
	// has looked since the clock moved.
	witness, err := c.NewSession(ctx, ttl/2)
	if err != nil {
		t.Fatal(err)
	}
	held := NewMutex(s, "/orphan")
	if err := held.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	waiter := NewMutex(other.Session(), "/orphan")
	wl := lockAsync(ctx, waiter.Lock)
	waitQueue(t, other, "/orphan", "waiter queued", queueShape(true, false))

	// The clock has not moved since the last keepalive: the session
	// expires at ttl on it, no earlier.
	s.Orphan()
	witness.Orphan()
	select {
	case <-held.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost not closed after Orphan")
	}
	if !errors.Is(held.Err(), ErrLockLost) {
		t.Fatalf("Err after Orphan = %v, want ErrLockLost", held.Err())
	}
	stillHeld := func(when string) {
		t.Helper()
		q, err := other.LockQueue(ctx, "/orphan")
		if err != nil {
			t.Fatal(err)
		}
		if len(q) != 2 || q[0].Session != s.ID() || !q[0].Granted || q[0].Phantom {
			t.Fatalf("queue %s: %+v, want the orphaned session's lock still held", when, q)
		}
		notDone(t, wl, "waiter "+when)
	}
	stillHeld("right after Orphan")

	clock.Advance(ttl - time.Millisecond)
	waitSessionGone(t, other, witness.ID())
	stillHeld("a TTL less 1ms after the last keepalive")

	clock.Advance(2 * time.Millisecond)
	// Expired: the lock turns phantom for the lock-delay, and the waiter
	// waits, since the clock does not move.
	q := waitQueue(t, other, "/orphan", "the orphaned session expired, its lock phantom", func(q []LockInfo) error {
		if len(q) != 2 || q[0].Session != s.ID() || !q[0].Phantom {
			return fmt.Errorf("queue %+v", q)
		}
		return nil
	})
	notDone(t, wl, "waiter during the lock-delay")
	clock.Advance(testLockDelay)
	done(t, wl, "waiter after the orphaned session expired and the lock-delay")
	info := waitQueue(t, other, "/orphan", "the waiter holds", queueShape(true))[0]
	if info.GrantTime < q[0].DelayEnd {
		t.Fatalf("waiter granted at %d, before the lock-delay ended at %d", info.GrantTime, q[0].DelayEnd)
	}
	list, err := other.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, si := range list {
		if si.ID == s.ID() {
			t.Fatalf("orphaned session %d still listed after its lock moved on", s.ID())
		}
	}
	if err := waiter.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitSessionGone polls until session id is no longer listed.
func waitSessionGone(t *testing.T, c *Client, id uint64) {
	t.Helper()
	servertest.Eventually(t, fmt.Sprintf("session %d expired", id), func() error {
		list, err := c.Sessions(testCtx(t))
		if err != nil {
			return err
		}
		for _, si := range list {
			if si.ID == id {
				return errors.New("still listed")
			}
		}
		return nil
	})
}
