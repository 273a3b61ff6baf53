package client

import (
	"context"
	"testing"
	"time"
)

// A keepalive that found no answer within TTL/3 on a connection the
// watchdog watches waited on a member that is alive (the watchdog closes
// the connection to one that went silent): the connection stays, and the
// keepalive is retried on it. Reconnecting sent thousands of clients of a
// slow leader into a storm of their own making.
func TestKeepaliveTimeoutKeepsAWatchedConnection(t *testing.T) {
	tc := startCluster(t, 1, clusterOptions{})
	c := tc.dial(3 * time.Second)
	l := c.current()
	if l == nil || !l.conn.Watched() {
		t.Fatalf("link %v: want a connection the watchdog watches (default FailureTimeout)", l)
	}
	c.renewFailed(l, c.def, context.DeadlineExceeded)
	if c.current() != l || l.conn.Context().Err() != nil {
		t.Fatal("a keepalive timeout on a watched connection dropped it: the member is alive, the client would only reconnect into its load")
	}
	// The session renews on the same connection afterwards.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Create(ctx, "/ka", nil); err != nil {
		t.Fatal(err)
	}
	if c.current() != l {
		t.Fatal("the connection changed")
	}
}
