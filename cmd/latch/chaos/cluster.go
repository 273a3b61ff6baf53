package chaos

import (
	"time"

	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// electionTimeout is the raft election timeout of every member: proc
// runs latchd with its default timing, the one users get
// (server.DefaultConfig; TestElectionTimeoutIsLatchdDefault keeps them
// equal without linking the server into latch).
const electionTimeout = 500 * time.Millisecond

// recoverTimeout bounds how long the cluster may take to elect a ready
// leader again after a fault healed.
const recoverTimeout = 30 * time.Second

// startCluster starts a run's latchd members (proc.LaunchCluster): n real
// processes on loopback, each with its own data dir under dir,
// bootstrapped together with --fault-injection and extra, and waits for a
// settled cluster.
func startCluster(n int, bin, dir string, certs session.DevCerts, extra ...string) (*proc.Cluster, error) {
	return proc.LaunchCluster(n, bin, dir, certs, append([]string{"--fault-injection"}, extra...)...)
}
