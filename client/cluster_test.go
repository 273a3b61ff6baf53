package client

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	"github.com/latch-io/latch/server"
	"github.com/latch-io/latch/server/servertest"
	"github.com/latch-io/latch/session"
)

// testCluster is a real in-process cluster (badger, raft over TCP, the QUIC
// front on loopback) and what a client needs to reach it.
type testCluster struct {
	*servertest.Cluster
	t   testing.TB
	tls *tls.Config
}

// clusterOptions tune startCluster.
type clusterOptions struct {
	// childrenPage is the servers' largest Children page (0: default).
	childrenPage int
	// watchHistory is how many events the servers keep for watches that
	// resume (0: default).
	watchHistory int
	// maxRequests is the servers' MaxRequestsPerConn (0: default); their
	// MaxWatchesPerConn is then half of it.
	maxRequests int
	// admins are the servers' Config.Admins ("" makes every client
	// without a certificate an admin).
	admins []string
	// lockDelay is the default lock-delay (0: default).
	lockDelay time.Duration
	// unboundedLockRequests lifts the per-session lock request cap.
	unboundedLockRequests bool
	// noMux makes the servers members without the mux stream, like ones
	// built before it.
	noMux bool
	// inMemory puts raft on servertest's in-memory network, which the
	// test cuts with Partition.
	inMemory bool
	// api serves the HTTP API on a free port (Server.APIAddr).
	api bool
	// clock, when set, is the servers' time, which the test moves
	// (servertest.Options.Clock).
	clock *session.ManualClock
}

func startCluster(t testing.TB, n int, o clusterOptions) *testCluster {
	t.Helper()
	tc := &testCluster{t: t}
	tc.Cluster = servertest.StartCluster(t, n, &servertest.Options{
		Configure: func(i int, cfg *server.Config) {
			if o.childrenPage > 0 {
				cfg.Limits.MaxChildrenPage = o.childrenPage
			}
			if o.watchHistory > 0 {
				cfg.WatchHistory = o.watchHistory
			}
			if o.maxRequests > 0 {
				cfg.MaxRequestsPerConn, cfg.MaxWatchesPerConn = o.maxRequests, o.maxRequests/2
			}
			cfg.Admins = o.admins
			if o.lockDelay > 0 {
				cfg.Limits.DefaultLockDelayMillis = o.lockDelay.Milliseconds()
			}
			if o.unboundedLockRequests {
				cfg.Limits.MaxLockRequestsPerSession = 0
			}
			cfg.Transport.DisableMux = o.noMux
			if o.api {
				cfg.APIAddr = "127.0.0.1:0"
			}
		},
		InMemory: o.inMemory,
		Clock:    o.clock,
	})
	var err error
	tc.tls, err = session.ClientTLS(tc.Certs().CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	tc.WaitLeader()
	// Redirects need every member's client address, which members
	// publish through the log once the cluster runs.
	tc.WaitMembers()
	return tc
}

// endpoint returns member i's client address.
func (tc *testCluster) endpoint(i int) string { return tc.Server(i).ClientAddr() }

// endpoints returns every running member's client address.
func (tc *testCluster) endpoints() []string {
	var out []string
	for _, i := range tc.Running() {
		out = append(out, tc.endpoint(i))
	}
	return out
}

// dial connects a client to the given endpoints (all members when none)
// and closes it when the test ends.
func (tc *testCluster) dial(ttl time.Duration, endpoints ...string) *Client {
	tc.t.Helper()
	if len(endpoints) == 0 {
		endpoints = tc.endpoints()
	}
	ctx, cancel := context.WithTimeout(context.Background(), servertest.WaitTimeout)
	defer cancel()
	c, err := Dial(ctx, Config{
		Endpoints:  endpoints,
		TLS:        tc.tls,
		SessionTTL: ttl,
		MinBackoff: 10 * time.Millisecond,
		MaxBackoff: 200 * time.Millisecond,
		Logger:     servertest.Logger(),
	})
	if err != nil {
		tc.t.Fatalf("dial %v: %v", endpoints, err)
	}
	tc.t.Cleanup(func() { c.Close() })
	return c
}

// ctx returns a context bounded by the servertest wait timeout.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), servertest.WaitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// nextEvent returns the watcher's next event or fails the test.
func nextEvent(t *testing.T, w *Watcher) Event {
	t.Helper()
	select {
	case ev, ok := <-w.Events():
		if !ok {
			t.Fatalf("watch ended: %v", w.Err())
		}
		return ev
	case <-time.After(servertest.WaitTimeout):
		t.Fatal("no event")
	}
	return Event{}
}

// noEvent fails the test if the watcher has an event ready now. The
// events it guards against would have been sent before the event the test
// waited for last, so they would be in the channel already.
func noEvent(t *testing.T, w *Watcher) {
	t.Helper()
	select {
	case ev, ok := <-w.Events():
		if ok {
			t.Fatalf("unexpected event %+v", ev)
		}
	default:
	}
}

// wait fails the test unless ch is closed (or yields) within the
// servertest wait timeout.
func wait[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(servertest.WaitTimeout):
		t.Fatalf("%s: not done after %v", what, servertest.WaitTimeout)
	}
	var zero T
	return zero
}
