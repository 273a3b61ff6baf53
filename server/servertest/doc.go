// Package servertest runs in-process latch clusters for tests: real badger
// stores in t.TempDir(), real raft with mutual TLS, the QUIC front on
// 127.0.0.1 with free ports, short raft timeouts.
//
//	c := servertest.StartCluster(t, 3, nil)
//	leader := c.WaitLeader()
//	res := c.Propose(ctx, &namespace.Command{Op: namespace.OpCreate, Path: "/a"})
//	c.Stop(leader); c.WaitLeader(); c.Restart(leader)
//
// Raft runs over TCP on 127.0.0.1 unless Options.InMemory puts it on a
// Network in memory (Config.RaftLayer), which the test cuts and mends:
//
//	c := servertest.StartCluster(t, 3, &servertest.Options{InMemory: true, Clock: clock})
//	c.Partition([]int{leader}, others); ...; c.Heal()
//
// Options.Clock (a session.ManualClock) is the members' time: session
// leases, lock timers and the cluster time move when the test calls
// clock.Advance, so a test of expiry does not wait out a TTL. Raft's own
// timers (heartbeats, elections) stay real. Tests about logic (partitions,
// leader changes, expiry, lock hand-off) belong here; what only real
// processes show (a SIGKILL, a SIGSTOP, a process's resources) stays with
// package proc.
//
// The cluster closes itself in t.Cleanup. Set LATCH_TEST_LOG=debug (or
// info, warn) to see the members' logs on stderr.
package servertest
