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
	tc := &testCluster{t: t}
	tc.Cluster = servertest.StartCluster(t, n, &servertest.Options{
		Configure: func(i int, cfg *server.Config) {
			cfg.Limits.DefaultLockDelayMillis = testLockDelay.Milliseconds()
			cfg.ExpiryTick = testExpiryTick
		},
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
