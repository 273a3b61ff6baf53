// Package servertest runs in-process latch clusters for tests: real badger
// stores in t.TempDir(), real raft over TCP on 127.0.0.1 with free ports,
// short raft timeouts.
//
//	c := servertest.StartCluster(t, 3, nil)
//	leader := c.WaitLeader()
//	res := c.Propose(ctx, &namespace.Command{Op: namespace.OpCreate, Path: "/a"})
//	c.Stop(leader); c.WaitLeader(); c.Restart(leader)
//
// The cluster closes itself in t.Cleanup. Set LATCH_TEST_LOG=debug (or
// info, warn) to see the members' logs on stderr.
package servertest
