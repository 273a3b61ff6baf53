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
	)
}
