package client

import (
	"testing"
	"time"

	"github.com/latch-io/latch/server"
	"github.com/latch-io/latch/server/servertest"
	"github.com/latch-io/latch/session"
)

// Lock tests run with short lock-delays and a quick reaper, so that
// expiries and lock-delays fit in a test's time.
const (
	testLockDelay  = 300 * time.Millisecond
	testExpiryTick = 50 * time.Millisecond
)

// startLockCluster starts an n-member cluster tuned for lock tests and
// waits until clients can use it.
func startLockCluster(t testing.TB, n int) *testCluster {
	t.Helper()
	return startLockClusterWith(t, n, nil)
}

// startLockClusterWith is startLockCluster on clock, a clock the test
// moves (servertest.Options.Clock: session leases, lock-delays and hold
// TTLs follow it), with raft on servertest's in-memory network; nil is
// the real clock and TCP.
func startLockClusterWith(t testing.TB, n int, clock *session.ManualClock) *testCluster {
	t.Helper()
	tc := &testCluster{t: t}
	tc.Cluster = servertest.StartCluster(t, n, &servertest.Options{
		Configure: func(i int, cfg *server.Config) {
			cfg.Limits.DefaultLockDelayMillis = testLockDelay.Milliseconds()
			if clock == nil {
				cfg.ExpiryTick = testExpiryTick
			}
		},
		InMemory: clock != nil,
		Clock:    clock,
	})
	var err error
	tc.tls, err = session.ClientTLS(tc.Certs().CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	tc.WaitLeader()
	tc.WaitMembers()
	return tc
}
