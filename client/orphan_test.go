package client

import (
	"errors"
	"testing"
	"time"
)

// TestOrphanKeepsLocks: Orphan leaves a held lock with the session on the
// server. The lock stays held (the waiter behind it is not granted) until
// the server expires the session, and then lock-delay applies, as after a
// crash. Locally the Mutex reports the lock lost at once.
func TestOrphanKeepsLocks(t *testing.T) {
	tc := startLockCluster(t, 1)
	c, other := tc.dial(5*time.Second), tc.dial(5*time.Second)
	ctx := testCtx(t)
	const ttl = time.Second
	s, err := c.NewSession(ctx, ttl)
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

	orphaned := time.Now()
	s.Orphan()
	select {
	case <-held.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("Lost not closed after Orphan")
	}
	if !errors.Is(held.Err(), ErrLockLost) {
		t.Fatalf("Err after Orphan = %v, want ErrLockLost", held.Err())
	}
	// Still held by the orphaned session on the server.
	q, err := other.LockQueue(ctx, "/orphan")
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 2 || q[0].Session != s.ID() || !q[0].Granted || q[0].Phantom {
		t.Fatalf("queue right after Orphan: %+v, want the orphaned session's lock still held", q)
	}
	notDone(t, wl, "waiter right after Orphan")

	done(t, wl, "waiter after the orphaned session expired")
	// The session's last keepalive was acknowledged at most TTL/3 before
	// Orphan, so it expired no earlier than 2/3 TTL after; lock-delay
	// follows.
	if waited, least := time.Since(orphaned), ttl-ttl/3+testLockDelay; waited < least {
		t.Fatalf("waiter granted %v after Orphan, before the session could expire and lock-delay pass (%v)", waited, least)
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
