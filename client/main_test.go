package client

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the package's tests, or, when re-executed by a process
// test, the client child (see process_test.go). Every test closes its
// clients, watchers and clusters: a goroutine left behind (a keepalive
// loop, a watch, a QUIC connection) fails the package.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	goleak.VerifyTestMain(m,
		// badger and raft start process-wide helpers that outlive a
		// cluster; they are not ours to stop.
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreAnyFunction("github.com/dgraph-io/ristretto/v2.(*defaultPolicy[...]).processItems"),
		goleak.IgnoreAnyFunction("github.com/dgraph-io/ristretto/v2.(*Cache[...]).processItems"),
	)
}
