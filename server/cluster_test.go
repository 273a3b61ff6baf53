package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server"
	"github.com/latch-io/latch/server/servertest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), servertest.WaitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func create(path, data string) *namespace.Command {
	return &namespace.Command{Op: namespace.OpCreate, Path: path, Data: []byte(data), Version: namespace.AnyVersion}
}

func set(path, data string) *namespace.Command {
	return &namespace.Command{Op: namespace.OpSet, Path: path, Data: []byte(data), Version: namespace.AnyVersion}
}

// waitData polls member i's store until path holds data.
func waitData(t *testing.T, c *servertest.Cluster, i int, path, data string) {
	t.Helper()
	servertest.Eventually(t, fmt.Sprintf("n%d has %s=%q", i+1, path, data), func() error {
		s := c.Server(i)
		if s == nil {
			return errors.New("stopped")
		}
		got, _, err := s.Store().Get(path)
		if err != nil {
			return err
		}
		if string(got) != data {
			return fmt.Errorf("got %q", got)
		}
		return nil
	})
}

func mustCommit(t *testing.T, c *servertest.Cluster, cmd *namespace.Command) *namespace.Result {
	t.Helper()
	res := c.Propose(ctxT(t), cmd)
	if res.Err != nil {
		t.Fatalf("%v %s: %v", cmd.Op, cmd.Path, res.Err)
	}
	return res
}

func TestClusterReplicatesWrites(t *testing.T) {
	c := servertest.StartCluster(t, 3, nil)
	c.WaitLeader()
	var last uint64
	for i := 0; i < 20; i++ {
		res := mustCommit(t, c, create(fmt.Sprintf("/k%02d", i), fmt.Sprintf("v%d", i)))
		if res.Index <= last {
			t.Fatalf("index %d not after %d", res.Index, last)
		}
		last = res.Index
		if len(res.Events) == 0 || res.Events[0].Type != namespace.EventCreated || res.Events[0].Rev != res.Index {
			t.Fatalf("create result events = %+v", res.Events)
		}
	}
	for m := 0; m < 3; m++ {
		for i := 0; i < 20; i++ {
			waitData(t, c, m, fmt.Sprintf("/k%02d", i), fmt.Sprintf("v%d", i))
		}
	}
	// A rejected command commits as a Result error, not a Propose error.
	res := c.Propose(ctxT(t), create("/k00", "again"))
	if !errors.Is(res.Err, namespace.ErrNodeExists) {
		t.Fatalf("duplicate create: Err = %v, want ErrNodeExists", res.Err)
	}
}

func TestLeaderFailoverKeepsAcknowledgedWrites(t *testing.T) {
	c := servertest.StartCluster(t, 3, nil)
	old := c.WaitLeader()
	for i := 0; i < 10; i++ {
		mustCommit(t, c, create(fmt.Sprintf("/a%d", i), "x"))
	}
	c.Stop(old)
	leader := c.WaitLeader()
	if leader == old {
		t.Fatalf("stopped member still leader")
	}
	// Every acknowledged write is on the new leader without waiting: it
	// applied all earlier entries before reporting ready.
	for i := 0; i < 10; i++ {
		if _, _, err := c.Server(leader).Store().Get(fmt.Sprintf("/a%d", i)); err != nil {
			t.Fatalf("new leader lost /a%d: %v", i, err)
		}
	}
	for i := 0; i < 10; i++ {
		mustCommit(t, c, create(fmt.Sprintf("/b%d", i), "y"))
	}
	c.Restart(old)
	for i := 0; i < 10; i++ {
		waitData(t, c, old, fmt.Sprintf("/a%d", i), "x")
		waitData(t, c, old, fmt.Sprintf("/b%d", i), "y")
	}
	st, err := c.Server(old).Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.LeaderID != c.Server(leader).ID() {
		t.Fatalf("restarted member follows %q, want %q", st.LeaderID, c.Server(leader).ID())
	}
}

func TestLaggingMemberCatchesUpBySnapshot(t *testing.T) {
	c := servertest.StartCluster(t, 3, &servertest.Options{Configure: func(i int, cfg *server.Config) {
		cfg.TrailingLogs = 5
		cfg.SnapshotThreshold = 1 << 30 // only the snapshots this test forces
	}})
	leader := c.WaitLeader()
	lag := (leader + 1) % 3
	mustCommit(t, c, create("/before", "1"))
	c.WaitApplied(c.Server(leader).Store().AppliedIndex())
	c.Stop(lag)

	for i := 0; i < 50; i++ {
		mustCommit(t, c, create(fmt.Sprintf("/during%02d", i), fmt.Sprint(i)))
	}
	mustCommit(t, c, set("/before", "2"))
	for _, i := range c.Running() {
		if err := c.Server(i).Snapshot(ctxT(t)); err != nil {
			t.Fatalf("snapshot n%d: %v", i+1, err)
		}
	}
	st, _ := c.Server(leader).Status()
	if st.SnapshotIndex == 0 {
		t.Fatalf("leader took no snapshot: %+v", st)
	}

	c.Restart(lag)
	waitData(t, c, lag, "/before", "2")
	waitData(t, c, lag, "/during49", "49")
	st, err := c.Server(lag).Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.SnapshotRestores == 0 {
		t.Fatalf("lagging member caught up without a snapshot install: %+v", st)
	}
	// The installed state is the leader's, byte for byte in Dump.
	want := c.Server(leader).Store().AppliedIndex()
	c.WaitApplied(want)
	var a, b bytes.Buffer
	if err := c.Server(leader).Store().Dump(&a); err != nil {
		t.Fatal(err)
	}
	if err := c.Server(lag).Store().Dump(&b); err != nil {
		t.Fatal(err)
	}
	if a.String() != b.String() {
		t.Fatalf("state differs after snapshot install:\nleader:\n%s\nlagger:\n%s", a.String(), b.String())
	}
	// And it keeps following.
	mustCommit(t, c, create("/after", "3"))
	waitData(t, c, lag, "/after", "3")
}

func TestRestartAppliesNothingTwice(t *testing.T) {
	c := servertest.StartCluster(t, 3, &servertest.Options{Configure: func(i int, cfg *server.Config) {
		cfg.SnapshotThreshold = 1 << 30
	}})
	c.WaitLeader()
	c.WaitMembers() // no background writes from here on
	mustCommit(t, c, create("/counter", "0"))
	for i := 1; i <= 10; i++ {
		mustCommit(t, c, set("/counter", fmt.Sprint(i)))
	}
	// Snapshots make raft replay from their index on restart, below what
	// the namespace already applied: the namespace must skip those.
	c.WaitApplied(c.Server(c.WaitLeader()).Store().AppliedIndex())
	for i := 0; i < 3; i++ {
		if err := c.Server(i).Snapshot(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 11; i <= 15; i++ {
		mustCommit(t, c, set("/counter", fmt.Sprint(i)))
	}
	final := c.Server(c.WaitLeader()).Store().AppliedIndex()
	c.WaitApplied(final)

	type before struct {
		applied uint64
		stat    namespace.Stat
	}
	var was [3]before
	for i := 0; i < 3; i++ {
		_, st, err := c.Server(i).Store().Get("/counter")
		if err != nil {
			t.Fatal(err)
		}
		was[i] = before{c.Server(i).Store().AppliedIndex(), st}
		if st.Version != 15 {
			t.Fatalf("n%d /counter version %d, want 15", i+1, st.Version)
		}
	}
	for i := 0; i < 3; i++ {
		c.Stop(i)
	}
	for i := 0; i < 3; i++ {
		c.Restart(i)
		if got := c.Server(i).Store().AppliedIndex(); got != was[i].applied {
			t.Fatalf("n%d reopened at applied %d, want %d", i+1, got, was[i].applied)
		}
	}
	c.WaitLeader()
	mustCommit(t, c, set("/counter", "16"))
	for i := 0; i < 3; i++ {
		waitData(t, c, i, "/counter", "16")
		_, st, err := c.Server(i).Store().Get("/counter")
		if err != nil {
			t.Fatal(err)
		}
		if st.Version != 16 || st.CreateRev != was[i].stat.CreateRev {
			t.Fatalf("n%d after restart: version %d createRev %d, want 16 and %d (an entry was applied twice)",
				i+1, st.Version, st.CreateRev, was[i].stat.CreateRev)
		}
		status, _ := c.Server(i).Status()
		if status.SnapshotRestores != 0 {
			t.Fatalf("n%d restored a snapshot on a plain restart", i+1)
		}
	}
}

func TestFollowerRedirectsToLeader(t *testing.T) {
	c := servertest.StartCluster(t, 3, nil)
	leader := c.WaitLeader()
	ls := c.Server(leader)
	follower := c.Server((leader + 1) % 3)
	// Redirects name the leader's addresses from replicated metadata.
	servertest.Eventually(t, "leader metadata on follower", func() error {
		ms, err := follower.Store().Members()
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.ID == ls.ID() && m.HTTPAddr == ls.HTTPAddr() {
				return nil
			}
		}
		return fmt.Errorf("members %+v", ms)
	})
	_, err := follower.Propose(ctxT(t), create("/x", ""))
	var nl *server.NotLeaderError
	if !errors.As(err, &nl) || !errors.Is(err, server.ErrNotLeader) {
		t.Fatalf("follower Propose err = %v, want *NotLeaderError", err)
	}
	if nl.LeaderID != ls.ID() || nl.LeaderClientAddr != ls.ClientAddr() || nl.LeaderHTTPAddr != ls.HTTPAddr() {
		t.Fatalf("NotLeaderError = %+v, want leader %s %s %s", nl, ls.ID(), ls.ClientAddr(), ls.HTTPAddr())
	}
	if err := follower.LinearizableRead(ctxT(t)); !errors.As(err, &nl) || nl.LeaderID != ls.ID() {
		t.Fatalf("follower LinearizableRead err = %v, want NotLeaderError naming %s", err, ls.ID())
	}
	if id, addr := follower.Leader(); id != ls.ID() || addr != ls.ClientAddr() {
		t.Fatalf("follower.Leader() = %q %q", id, addr)
	}
	if follower.IsLeader() {
		t.Fatal("follower IsLeader")
	}
}

func TestMembersRecordTheirAddresses(t *testing.T) {
	c := servertest.StartCluster(t, 3, nil)
	c.WaitLeader()
	for i := 0; i < 3; i++ {
		s := c.Server(i)
		servertest.Eventually(t, fmt.Sprintf("n%d sees all metadata", i+1), func() error {
			ms, err := s.Members()
			if err != nil {
				return err
			}
			if len(ms) != 3 {
				return fmt.Errorf("%d members: %+v", len(ms), ms)
			}
			for j, m := range ms {
				o := c.Server(j)
				if m.ID != o.ID() || m.RaftAddr != o.RaftAddr() || m.HTTPAddr != o.HTTPAddr() ||
					m.ClientAddr != o.ClientAddr() || m.Suffrage != "voter" {
					return fmt.Errorf("member %d = %+v", j, m)
				}
			}
			return nil
		})
	}
}

func TestLinearizableReadSeesCommittedWrites(t *testing.T) {
	c := servertest.StartCluster(t, 3, nil)
	leader := c.Server(c.WaitLeader())
	for i := 0; i < 5; i++ {
		mustCommit(t, c, create(fmt.Sprintf("/r%d", i), fmt.Sprint(i)))
		if err := leader.LinearizableRead(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := leader.Store().Get(fmt.Sprintf("/r%d", i)); err != nil {
			t.Fatalf("read after write: %v", err)
		}
	}

	// The coalescing is judged on one leader: a batch during which a
	// loaded machine moved leadership is run again on the new one.
	const readers = 64
	for attempt := 0; ; attempt++ {
		leader := c.Server(c.WaitLeader())
		before := metricValue(t, c, leader, `latch_leader_verifies_total{member="`+leader.ID()+`"}`)
		errs := make(chan error, readers)
		start := make(chan struct{})
		for i := 0; i < readers; i++ {
			go func() {
				<-start
				errs <- leader.LinearizableRead(context.Background())
			}()
		}
		close(start)
		var moved error
		for i := 0; i < readers; i++ {
			switch err := <-errs; {
			case errors.Is(err, server.ErrNotLeader) && attempt < 5:
				moved = err
			case err != nil:
				t.Fatal(err)
			}
		}
		if moved != nil {
			t.Logf("leadership moved during the batch (%v): again", moved)
			continue
		}
		rounds := metricValue(t, c, leader, `latch_leader_verifies_total{member="`+leader.ID()+`"}`) - before
		if rounds < 1 || rounds > readers/4 {
			t.Fatalf("%d concurrent reads took %v verify rounds; want them coalesced", readers, rounds)
		}
		return
	}
}

func TestProposeHonoursContext(t *testing.T) {
	c := servertest.StartCluster(t, 1, nil)
	s := c.Server(c.WaitLeader())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Propose(ctx, create("/c", "")); err == nil {
		// An already-cancelled ctx may still race a fast commit; either
		// answer is fine as long as a cancelled wait says so.
		return
	} else if !errors.Is(err, context.Canceled) || !errors.Is(err, server.ErrUnknownOutcome) {
		t.Fatalf("cancelled Propose err = %v", err)
	}
}

func TestSubscribeLeadership(t *testing.T) {
	c := servertest.StartCluster(t, 3, nil)
	old := c.WaitLeader()
	type sub struct {
		ch     <-chan bool
		cancel func()
	}
	var subs [3]sub
	for i := range subs {
		ch, cancel := c.Server(i).SubscribeLeadership()
		defer cancel()
		subs[i] = sub{ch, cancel}
		// The current state is delivered at once.
		if v := <-ch; v != (i == old) {
			t.Fatalf("n%d first value %v, leader is n%d", i+1, v, old+1)
		}
	}
	c.Stop(old)
	// Close tells the old leader's subscribers that leadership is gone.
	select {
	case v := <-subs[old].ch:
		if v {
			t.Fatal("stopped leader reported true")
		}
	default:
		t.Fatal("stopped leader's subscriber got nothing")
	}
	leader := c.WaitLeader()
	select {
	case v := <-subs[leader].ch:
		if !v {
			t.Fatal("new leader's subscriber got false")
		}
	case <-ctxT(t).Done():
		t.Fatal("new leader's subscriber got nothing")
	}
	if !c.Server(leader).IsLeader() {
		t.Fatal("subscriber saw true before IsLeader")
	}
	// A cancelled subscription gets nothing more.
	other := 3 - old - leader
	subs[other].cancel()
	c.Stop(leader)
	c.Restart(old)
	c.WaitLeader()
	select {
	case v := <-subs[other].ch:
		t.Fatalf("cancelled subscription received %v", v)
	default:
	}
}
