// Package proc runs real latchd processes for tests: it builds the binary
// once per test process, starts members with free loopback ports, sends
// SIGKILL, SIGSTOP, SIGCONT and SIGTERM, and reads /readyz and /v1/status.
// The crash and chaos tests drive clusters through it.
//
//	func TestMain(m *testing.M) { code := m.Run(); proc.RemoveBuild(); os.Exit(code) }
//
//	c := proc.StartCluster(t, 3)
//	leader := c.WaitLeader(t)
//	c.Nodes[leader].Kill(t)
//	c.WaitLeader(t)
//	c.Nodes[leader].Restart(t)
//
// Every process is killed in t.Cleanup if the test left it running, and a
// failed test prints the tail of each member's log.
//
// Outside tests (`latch chaos`, `latch bench failover`), LaunchCluster
// starts a cluster and its methods control it with errors instead of a
// testing.TB: Leader and AwaitLeader find the one ready leader (the same
// LeaderRule check WaitLeader uses), Kill, Relaunch (retrying the bind of
// the old ports, as servertest's Restart does, through Rebind), Block,
// Partition and Heal (--fault-injection) and Shutdown. NewDetachedNode,
// Launch, Signal, WaitExit and Await do the same for one member, and
// GoBuild builds a binary of the module; the caller stops what it
// launched.
package proc

// TB is the part of testing.TB the harness uses; a *testing.T is one. proc
// does not import package testing itself, so that `latch chaos` links the
// harness without the test framework.
type TB interface {
	Helper()
	Cleanup(func())
	TempDir() string
	Failed() bool
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}
