package client

import (
	"testing"
	"time"
)

// A watch is a subscription: a client that only watches is an idle one
// and sends no fast liveness pings, however long the watch stays open,
// while a Barrier.Wait, a blocking call built on a watch, has its
// connection pinged. Without the distinction thousands of watching
// clients would keep the leader busy echoing pings.
func TestWatchIsSubscriptionBarrierWaits(t *testing.T) {
	tc := startCluster(t, 1, clusterOptions{})
	ctx := testCtx(t)
	watcher, waiter := tc.dial(0), tc.dial(0)
	if _, err := watcher.Create(ctx, "/b", nil); err != nil {
		t.Fatal(err)
	}
	w, err := watcher.Watch(ctx, "/b")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	b := NewBarrier(waiter, waiter.Session(), "/b")
	waitErr := make(chan error, 1)
	go func() { waitErr <- b.Wait(ctx) }()

	pings := func(c *Client) uint64 {
		l, err := c.waitLink(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		return l.conn.Pings()
	}
	// The waiter's watchdog pings every quarter of FailureTimeout (300ms)
	// while it waits; eight pings are two FailureTimeouts of waiting, and
	// the watch was open all along.
	for pings(waiter) < 8 {
		select {
		case err := <-waitErr:
			t.Fatalf("Barrier.Wait returned early: %v", err)
		case <-ctx.Done():
			t.Fatalf("the waiting client sent %d pings", pings(waiter))
		case <-time.After(10 * time.Millisecond):
		}
	}
	if n := pings(watcher); n != 0 {
		t.Fatalf("the watching client sent %d liveness pings; a watch is not a waiting call", n)
	}
	if err := watcher.Delete(ctx, "/b"); err != nil {
		t.Fatal(err)
	}
	if err := <-waitErr; err != nil {
		t.Fatal(err)
	}
}

// A lock waiter further back than next in line waits like a
// subscription: only the waiter the next release grants has its
// connection pinged (FeatureLockNext). With every waiter pinging, 256
// waiters on 8 locks cost the leader more in pings than in handoffs.
func TestLockWaiterPingsOnlyWhenNext(t *testing.T) {
	tc := startCluster(t, 1, clusterOptions{})
	ctx := testCtx(t)
	holder, next, back := tc.dial(0), tc.dial(0), tc.dial(0)
	pings := func(c *Client) uint64 {
		l, err := c.waitLink(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		return l.conn.Pings()
	}
	queued := func(n int) {
		for {
			q, err := holder.LockQueue(ctx, "/l")
			if err != nil {
				t.Fatal(err)
			}
			if len(q) >= n {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%d requests queued, want %d", len(q), n)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	h := NewMutex(holder.Session(), "/l")
	if err := h.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	lock := func(c *Client) (*Mutex, chan error) {
		m, done := NewMutex(c.Session(), "/l"), make(chan error, 1)
		go func() { done <- m.Lock(ctx) }()
		return m, done
	}
	nm, nextDone := lock(next)
	queued(2)
	bm, backDone := lock(back)
	queued(3)
	// The waiter next in line pings every quarter of FailureTimeout; by
	// its second ping after the one further back queued, that one's
	// stream has its first frame.
	for until := pings(next) + 2; pings(next) < until; {
		select {
		case <-ctx.Done():
			t.Fatalf("the waiter next in line sent %d pings", pings(next))
		case <-time.After(10 * time.Millisecond):
		}
	}
	base := pings(back)
	for until := pings(next) + 8; pings(next) < until; {
		select {
		case err := <-nextDone:
			t.Fatalf("the waiter next in line returned early: %v", err)
		case <-ctx.Done():
			t.Fatalf("the waiter next in line sent %d pings", pings(next))
		case <-time.After(10 * time.Millisecond):
		}
	}
	if n := pings(back) - base; n != 0 {
		t.Fatalf("the waiter further back sent %d liveness pings while the one next in line sent 8", n)
	}
	// The queue moves: the one further back is next now, and pinged.
	if err := h.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-nextDone; err != nil {
		t.Fatal(err)
	}
	for until := pings(back) + 2; pings(back) < until; {
		select {
		case err := <-backDone:
			t.Fatalf("the last waiter returned before its turn: %v", err)
		case <-ctx.Done():
			t.Fatalf("the waiter next in line now sent %d pings", pings(back)-base)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := nm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-backDone; err != nil {
		t.Fatal(err)
	}
	if err := bm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
