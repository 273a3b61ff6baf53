package server_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every member goroutine (raft, badger, HTTP, membership and leadership
// loops, verify rounds) must end by Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// net/http keeps idle client connections to closed servers' ports
		// until they time out; they belong to the test's http.Client.
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		// raft never answers an entry still in its apply buffer when it
		// shuts down (TestStalledLeaderSeversRaft leaves one there: its
		// leader's log write was held until after the failure); the wait
		// on it ends with the process.
		goleak.IgnoreAnyFunction("github.com/latch-io/latch/server.(*Server).waitApply.func1"),
	)
}
