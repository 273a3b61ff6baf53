package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// These tests run real latchd processes (server/proc) and SIGKILL them, so
// durability rests on what reached disk, not on an in-process Stop.

func dialProcCluster(t *testing.T, c *proc.Cluster, ttl time.Duration) *Client {
	t.Helper()
	tlsConf, err := session.ClientTLS(c.Certs.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	var eps []string
	for _, n := range c.Nodes {
		eps = append(eps, n.ClientAddr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), proc.WaitTimeout)
	defer cancel()
	cl, err := Dial(ctx, Config{
		Endpoints: eps, TLS: tlsConf, SessionTTL: ttl,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// TestLeaderSIGKILLMidWriteLosesNoAcknowledgedWrite kills the leader while
// writers are creating nodes, restarts it, then kills every member at once
// and restarts them all: every create that was acknowledged must be there.
func TestLeaderSIGKILLMidWriteLosesNoAcknowledgedWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := proc.StartCluster(t, 3)
	leader := c.WaitLeader(t)
	cl := dialProcCluster(t, c, 5*time.Second)
	ctx := context.Background()
	mkdir(t, cl, "/crash")

	var (
		mu    sync.Mutex
		acked []string
		stop  = make(chan struct{})
		wg    sync.WaitGroup
	)
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p := fmt.Sprintf("/crash/w%d-%d", w, i)
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := cl.Create(wctx, p, []byte(p))
				cancel()
				if err == nil {
					mu.Lock()
					acked = append(acked, p)
					mu.Unlock()
				}
				// Failed or unknown outcomes are not acknowledged: they may
				// or may not exist afterwards, and either is correct.
			}
		}()
	}
	waitCount := func(n int) {
		t.Helper()
		deadline := time.Now().Add(proc.WaitTimeout)
		for count() < n {
			if time.Now().After(deadline) {
				close(stop)
				wg.Wait()
				t.Fatalf("only %d acknowledged writes, want %d", count(), n)
			}
			time.Sleep(5 * time.Millisecond) // polling the counter, not waiting out a condition
		}
	}
	waitCount(200)
	c.Nodes[leader].Kill(t) // mid-write: four creates are in flight
	before := count()
	waitCount(before + 200) // the client failed over and writes go on
	close(stop)
	wg.Wait()

	c.Nodes[leader].Restart(t)
	c.Nodes[leader].WaitReady(t)
	c.WaitLeader(t)

	// Now a crash of the whole cluster: acknowledged writes are in the
	// fsynced raft log of a majority, so they survive it.
	for _, n := range c.Nodes {
		n.Kill(t)
	}
	for _, n := range c.Nodes {
		n.Restart(t)
	}
	c.WaitLeader(t)

	mu.Lock()
	defer mu.Unlock()
	check := dialProcCluster(t, c, 5*time.Second)
	for _, p := range acked {
		data, _, err := check.Get(ctx, p)
		if err != nil {
			t.Fatalf("acknowledged write %s lost after SIGKILLs: %v", p, err)
		}
		if string(data) != p {
			t.Fatalf("%s holds %q", p, data)
		}
	}
	// The restarted members applied the same log: read every member's own
	// state and compare applied revisions of the last write.
	st, err := check.Stat(ctx, acked[len(acked)-1])
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		s, err := n.Status()
		if err != nil {
			t.Fatal(err)
		}
		if s.AppliedIndex < st.CreateRev {
			// Followers may trail the leader a moment; wait for them.
			n.WaitReady(t)
		}
	}
	t.Logf("%d acknowledged creates, all present after a leader SIGKILL and a whole-cluster SIGKILL", len(acked))
}

// TestSessionsSurviveLeaderSIGKILL holds 1,000 sessions, each owning an
// ephemeral node, on one client; the leader process is SIGKILLed. Every
// session must live on through the failover and a full TTL after it: no
// Done, no ephemeral deleted, no deletion event seen by a watcher.
func TestSessionsSurviveLeaderSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	const n = 1000
	ttl := 3 * time.Second
	c := proc.StartCluster(t, 3)
	leader := c.WaitLeader(t)
	cl := dialProcCluster(t, c, ttl)
	watcher := dialProcCluster(t, c, ttl)
	ctx := context.Background()
	mkdir(t, cl, "/eph")
	w, err := watcher.Watch(ctx, "/eph", Recursive())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Drain the watch from the start: a consumer that stops reading is
	// (rightly) cut off with a resync, which is not what this test is about.
	var (
		evMu    sync.Mutex
		deleted []string
		resyncs int
	)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for ev := range w.Events() {
			evMu.Lock()
			switch ev.Type {
			case EventDeleted:
				deleted = append(deleted, ev.Path)
			case EventResync:
				resyncs++
			}
			evMu.Unlock()
		}
	}()

	sessions := make([]*Session, n)
	for i := range sessions {
		s, err := cl.NewSession(ctx, ttl)
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		if err := createSure(ctx, s, fmt.Sprintf("/eph/s%d", i)); err != nil {
			t.Fatal(err)
		}
		sessions[i] = s
	}

	c.Nodes[leader].Kill(t)
	c.WaitLeader(t)
	// A Sync through the client proves it has failed over and resumed its
	// sessions (reads and Sync are retried across a reconnect; writes are not).
	if err := cl.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// Observe for longer than a TTL after the failover: any false expiry
	// would have happened by then.
	<-time.After(ttl + ttl/2)
	evMu.Lock()
	if resyncs > 0 {
		t.Fatalf("the watch needed %d resyncs across the failover", resyncs)
	}
	if len(deleted) > 0 {
		t.Fatalf("%d ephemerals deleted across the failover, e.g. %s", len(deleted), deleted[0])
	}
	evMu.Unlock()
	for i, s := range sessions {
		select {
		case <-s.Done():
			t.Fatalf("session %d (%d) ended: %v", i, s.ID(), s.Err())
		default:
		}
	}
	names, err := cl.Children(ctx, "/eph")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != n {
		t.Fatalf("%d ephemerals after failover, want %d", len(names), n)
	}
	// And they do end when asked: closing one removes its node.
	if err := sessions[0].Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cl.Get(ctx, "/eph/s0"); !errors.Is(err, ErrNoNode) {
		t.Fatalf("closed session's ephemeral: err = %v, want ErrNoNode", err)
	}
	w.Close()
	<-drained
}

// createSure creates an ephemeral node on s, resolving an unknown outcome
// (a leader change on a loaded machine during set-up) by reading it back.
func createSure(ctx context.Context, s *Session, p string) error {
	for {
		_, err := s.Create(ctx, p, nil, Ephemeral())
		if err == nil || !errors.Is(err, ErrUnknownOutcome) {
			return err
		}
		st, err := s.Client().Stat(ctx, p)
		if err == nil && st.EphemeralOwner == s.ID() {
			return nil
		}
		if err != nil && !errors.Is(err, ErrNoNode) {
			return err
		}
	}
}

// mkdir creates a persistent node, resolving an unknown outcome by reading.
func mkdir(t *testing.T, c *Client, p string) {
	t.Helper()
	ctx := context.Background()
	for {
		_, err := c.Create(ctx, p, nil)
		if err == nil || errors.Is(err, ErrNodeExists) {
			return
		}
		if !errors.Is(err, ErrUnknownOutcome) {
			t.Fatal(err)
		}
	}
}
