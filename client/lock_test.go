package client

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/servertest"
)

// waitQueue polls path's lock queue until check accepts it.
func waitQueue(t *testing.T, c *Client, path string, what string, check func(q []LockInfo) error) []LockInfo {
	t.Helper()
	var last []LockInfo
	servertest.Eventually(t, what, func() error {
		q, err := c.LockQueue(testCtx(t), path)
		if err != nil {
			return err
		}
		last = q
		return check(q)
	})
	return last
}

// queueShape accepts a queue of exactly these grant states, in order.
func queueShape(granted ...bool) func(q []LockInfo) error {
	return func(q []LockInfo) error {
		if len(q) != len(granted) {
			return fmt.Errorf("queue %+v, want %d entries", q, len(granted))
		}
		for i, g := range granted {
			if q[i].Granted != g {
				return fmt.Errorf("queue %+v: entry %d granted=%v, want %v", q, i, q[i].Granted, g)
			}
		}
		return nil
	}
}

// lockAsync runs lock in a goroutine and returns its result channel.
func lockAsync(ctx context.Context, lock func(context.Context) error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- lock(ctx) }()
	return ch
}

func notDone(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s returned early: %v", what, err)
	default:
	}
}

func done(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(servertest.WaitTimeout):
		t.Fatalf("%s did not return", what)
	}
}

// TestLocks runs the lock tests that share one three-member cluster.
func TestLocks(t *testing.T) {
	tc := startLockCluster(t, 3)
	c1, c2, c3 := tc.dial(3*time.Second), tc.dial(3*time.Second), tc.dial(3*time.Second)

	t.Run("MutexBasic", func(t *testing.T) {
		ctx := testCtx(t)
		m1 := NewMutex(c1.Session(), "/jobs/nightly")
		if err := m1.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		tok1 := m1.Token()
		if tok1 == 0 || m1.Node() == "" {
			t.Fatalf("token %d node %q after Lock", tok1, m1.Node())
		}
		if ok, err := c2.CheckSequencer(ctx, m1.Sequencer()); err != nil || !ok {
			t.Fatalf("CheckSequencer of the holder = %v, %v", ok, err)
		}
		m2 := NewMutex(c2.Session(), "/jobs/nightly")
		got := lockAsync(ctx, m2.Lock)
		waitQueue(t, c2, "/jobs/nightly", "second request queued", queueShape(true, false))
		notDone(t, got, "second Lock")
		if err := m1.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		done(t, got, "second Lock")
		if m2.Token() <= tok1 {
			t.Fatalf("second token %d not above first %d", m2.Token(), tok1)
		}
		if ok, _ := c2.CheckSequencer(ctx, m1.Sequencer()); ok {
			t.Fatal("the released holder's sequencer still checks")
		}
		select {
		case <-m1.Lost():
			t.Fatalf("Unlock closed Lost (%v)", m1.Err())
		default:
		}
		if err := m2.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m2.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("second Unlock = %v, want ErrNotHeld", err)
		}
	})

	// A Mutex whose Lock had to wait sends its next request on a stream
	// at once (the lock is likely contended again); one granted at once
	// goes back to the call. Both ways grant in order.
	t.Run("WaitedLockNextOnStream", func(t *testing.T) {
		ctx := testCtx(t)
		holder := NewMutex(c1.Session(), "/contended")
		waiter := NewMutex(c2.Session(), "/contended")
		waited := func(m *Mutex) bool {
			m.h.mu.Lock()
			defer m.h.mu.Unlock()
			return m.h.waited
		}
		for round := range 2 {
			if err := holder.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			got := lockAsync(ctx, waiter.Lock)
			waitQueue(t, c2, "/contended", "waiter queued", queueShape(true, false))
			if err := holder.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			done(t, got, "waiter's Lock")
			if !waited(waiter) || waited(holder) {
				t.Fatalf("round %d: waited flags waiter %v holder %v, want true false", round, waited(waiter), waited(holder))
			}
			if err := waiter.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		// Free now: the stream grants at once, and the next Lock is a call.
		if err := waiter.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if waited(waiter) {
			t.Fatal("a Lock granted at once left the waited flag set")
		}
		if err := waiter.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("TryLockAndTimeoutLeaveNothing", func(t *testing.T) {
		ctx := testCtx(t)
		m1 := NewMutex(c1.Session(), "/t")
		if err := m1.TryLock(ctx); err != nil {
			t.Fatal(err)
		}
		defer m1.Unlock(ctx)
		m2 := NewMutex(c2.Session(), "/t")
		if err := m2.TryLock(ctx); !errors.Is(err, ErrLocked) {
			t.Fatalf("TryLock of a held lock = %v, want ErrLocked", err)
		}
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		if err := m2.Lock(wctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock past its deadline = %v", err)
		}
		// A wait cancelled (not timed out) withdraws its node too.
		cctx, ccancel := context.WithCancel(ctx)
		got := lockAsync(cctx, NewMutex(c3.Session(), "/t").Lock)
		waitQueue(t, c3, "/t", "cancelled waiter queued", queueShape(true, false))
		ccancel()
		if err := <-got; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Lock = %v", err)
		}
		// ls shows only the holder's node: the failed waits left nothing.
		servertest.Eventually(t, "only the holder's node under /t", func() error {
			names, err := c2.Children(ctx, "/t")
			if err != nil {
				return err
			}
			if len(names) != 1 || "/t/"+names[0] != m1.Node() {
				return fmt.Errorf("children %v, want only %s", names, m1.Node())
			}
			return nil
		})
	})

	t.Run("GrantRacingTimeoutLeaksNothing", func(t *testing.T) {
		// A grant that races the waiter's timeout is either delivered or
		// released by the withdrawal: the lock never stays held by a
		// waiter that gave up.
		ctx := testCtx(t)
		granted := 0
		for i := range 20 {
			m1, m2 := NewMutex(c1.Session(), "/race"), NewMutex(c2.Session(), "/race")
			if err := m1.Lock(ctx); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, time.Duration(5+i%5)*time.Millisecond)
			got := lockAsync(wctx, m2.Lock)
			time.Sleep(time.Duration(i%6) * time.Millisecond) // vary the race, not waiting for a condition
			if err := m1.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			err := <-got
			cancel()
			if err == nil {
				granted++
				if err := m2.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			waitQueue(t, c3, "/race", "nothing held after the race", queueShape())
		}
		t.Logf("%d of 20 waiters got the lock before their deadline", granted)
	})

	t.Run("GrantAfterLeaseEndIsRefused", func(t *testing.T) {
		// A grant that arrives when the session's proven lease has run
		// out may belong to a dead session: Lock refuses it and releases.
		ctx := testCtx(t)
		m1 := NewMutex(c1.Session(), "/late")
		if err := m1.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		m2 := NewMutex(c2.Session(), "/late")
		m2.h.now = func() time.Time { return c2.Session().LeaseEnd().Add(time.Millisecond) }
		got := lockAsync(ctx, m2.Lock)
		waitQueue(t, c3, "/late", "second waits", queueShape(true, false))
		if err := m1.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; !errors.Is(err, ErrLockLost) {
			t.Fatalf("late grant: %v, want ErrLockLost", err)
		}
		if m2.Token() != 0 {
			t.Fatal("a refused grant is reported held")
		}
		waitQueue(t, c3, "/late", "the refused grant released", queueShape())
	})

	t.Run("RWMutex", func(t *testing.T) {
		ctx := testCtx(t)
		r1, r2 := NewRWMutex(c1.Session(), "/rw"), NewRWMutex(c2.Session(), "/rw")
		w := NewRWMutex(c3.Session(), "/rw")
		if err := r1.RLock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r2.RLock(ctx); err != nil { // readers together
			t.Fatal(err)
		}
		wl := lockAsync(ctx, w.Lock)
		waitQueue(t, c3, "/rw", "writer waits for both readers", queueShape(true, true, false))
		// A reader arriving after the waiting writer waits too (FIFO).
		r3 := NewRWMutex(c1.Session(), "/rw") // another request of c1's session: shared with shared is fine
		rl := lockAsync(ctx, r3.RLock)
		waitQueue(t, c3, "/rw", "late reader queued behind the writer", queueShape(true, true, false, false))
		if err := r1.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
		notDone(t, wl, "writer with one reader left")
		if err := r2.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
		done(t, wl, "writer")
		waitQueue(t, c3, "/rw", "writer alone", queueShape(true, false))
		notDone(t, rl, "reader behind the writer")
		if err := w.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		done(t, rl, "reader after the writer")
		if err := r3.RUnlock(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("HierarchyParentWaitsForChild", func(t *testing.T) {
		ctx := testCtx(t)
		child := NewMutex(c1.Session(), "/billing/job-a")
		if err := child.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		parent := NewMutex(c2.Session(), "/billing")
		pl := lockAsync(ctx, parent.Lock)
		waitQueue(t, c2, "/billing", "parent request queued", queueShape(false))
		// A sibling requested after the waiting parent waits for it.
		sib := NewMutex(c3.Session(), "/billing/job-b")
		sl := lockAsync(ctx, sib.Lock)
		waitQueue(t, c3, "/billing/job-b", "sibling queued", queueShape(false))
		notDone(t, pl, "parent Lock while a child is held")
		if err := child.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		done(t, pl, "parent Lock")
		notDone(t, sl, "child Lock requested after the parent")
		if err := parent.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		done(t, sl, "sibling Lock")
		if err := sib.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("SelfConflictWouldDeadlock", func(t *testing.T) {
		ctx := testCtx(t)
		a := NewMutex(c1.Session(), "/top/self")
		if err := a.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		defer a.Unlock(ctx)
		// (Not /: locking it takes admin rights.)
		for _, p := range []string{"/top/self", "/top/self/below", "/top"} {
			err := NewMutex(c1.Session(), p).Lock(ctx)
			if !errors.Is(err, ErrWouldDeadlock) {
				t.Fatalf("same session locking %s = %v, want ErrWouldDeadlock", p, err)
			}
		}
		if err := a.Lock(ctx); !errors.Is(err, ErrWouldDeadlock) {
			t.Fatalf("Lock of a held Mutex = %v", err)
		}
		// Another session of the same client is another owner: it waits.
		s2, err := c1.NewSession(ctx, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close(ctx)
		if err := NewMutex(s2, "/top/self").TryLock(ctx); !errors.Is(err, ErrLocked) {
			t.Fatalf("other session TryLock = %v, want ErrLocked", err)
		}
	})

	t.Run("LostOnSessionExpiry", func(t *testing.T) {
		ctx := testCtx(t)
		s, err := c1.NewSession(ctx, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		m := NewMutex(s, "/expiring")
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		next := NewMutex(c2.Session(), "/expiring")
		nl := lockAsync(ctx, next.Lock)
		waitQueue(t, c2, "/expiring", "next waiter queued", queueShape(true, false))
		// The leader expires the session (what its reaper does when the
		// lease runs out).
		res := tc.Propose(ctx, &namespace.Command{Op: namespace.OpSessionExpire, Sessions: []uint64{s.ID()}})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		select {
		case <-m.Lost():
		case <-time.After(servertest.WaitTimeout):
			t.Fatal("Lost not closed after the session expired")
		}
		if !errors.Is(m.Err(), ErrLockLost) {
			t.Fatalf("Err after expiry = %v, want ErrLockLost", m.Err())
		}
		// Lock-delay: the phantom keeps the lock for testLockDelay.
		q := waitQueue(t, c2, "/expiring", "holder turned phantom", func(q []LockInfo) error {
			if len(q) == 0 || !q[0].Phantom {
				return fmt.Errorf("queue %+v", q)
			}
			return nil
		})
		delayEnd := q[0].DelayEnd
		done(t, nl, "next waiter")
		info := waitQueue(t, c2, "/expiring", "next holds", queueShape(true))[0]
		if info.GrantTime < delayEnd {
			t.Fatalf("granted at %d, before the lock-delay ended at %d", info.GrantTime, delayEnd)
		}
		if err := next.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("HoldTTL", func(t *testing.T) {
		ctx := testCtx(t)
		m := NewMutex(c1.Session(), "/ttl", WithHoldTTL(400*time.Millisecond), WithLockDelay(0))
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		// Renewing keeps it past its first TTL.
		for time.Since(start) < 600*time.Millisecond {
			if err := m.Renew(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case <-m.Lost():
				t.Fatalf("lost while renewed: %v", m.Err())
			case <-time.After(100 * time.Millisecond): // the renewal period of this test
			}
		}
		select {
		case <-m.Lost():
		case <-time.After(servertest.WaitTimeout):
			t.Fatal("Lost not closed after the hold TTL")
		}
		if d := time.Since(start); d < 600*time.Millisecond {
			t.Fatalf("lost after %v", d)
		}
		// Locking again after the loss works (no ErrWouldDeadlock from the
		// lost hold), and there was no lock-delay.
		if err := m.TryLock(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-m.Lost():
			t.Fatal("the new hold reports the old loss")
		default:
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("Unlock of an unlocked Mutex = %v", err)
		}
	})
}
