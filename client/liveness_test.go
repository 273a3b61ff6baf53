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
