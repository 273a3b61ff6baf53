package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server"
	"github.com/latch-io/latch/server/servertest"
)

// fakeTime is a member's wall clock, which a test steps both ways, and a
// monotonic clock shared by the members, which only moves forward when
// the test says so (time that really passes, as every member sees it).
type fakeTime struct {
	mu   sync.Mutex
	wall []time.Time
	mono time.Duration
}

func (f *fakeTime) wallOf(i int) func() time.Time {
	return func() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.wall[i] }
}

func (f *fakeTime) monotonic() time.Duration { f.mu.Lock(); defer f.mu.Unlock(); return f.mono }

// step moves member i's wall clock only.
func (f *fakeTime) step(i int, d time.Duration) {
	f.mu.Lock()
	f.wall[i] = f.wall[i].Add(d)
	f.mu.Unlock()
}

// elapse lets d pass: every wall clock and the monotonic clock move.
func (f *fakeTime) elapse(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mono += d
	for i := range f.wall {
		f.wall[i] = f.wall[i].Add(d)
	}
}

// TestWallClockStepsDoNotMoveLockTimers steps the leader's wall clock an
// hour forward (a hold TTL must not end early), then two hours back (the
// TTL must still end once its time has passed), then moves leadership to
// a member whose wall clock is an hour behind (timers must not stall,
// nor entry times go back).
func TestWallClockStepsDoNotMoveLockTimers(t *testing.T) {
	start := time.Now()
	ft := &fakeTime{wall: []time.Time{start, start, start}}
	c := servertest.StartCluster(t, 3, &servertest.Options{Configure: func(i int, cfg *server.Config) {
		cfg.Clock, cfg.Monotonic = ft.wallOf(i), ft.monotonic
		cfg.ExpiryTick = 10 * time.Millisecond
	}})
	leader := c.WaitLeader()
	ctx := context.Background()
	s := c.Server(leader)

	sess := c.Propose(ctx, &namespace.Command{Op: namespace.OpSessionOpen, TTLMillis: 600_000, Secret: []byte("s")})
	if sess.Err != nil {
		t.Fatal(sess.Err)
	}
	lock := func(path string) (namespace.LockInfo, int64) {
		t.Helper()
		r := c.Propose(ctx, &namespace.Command{Op: namespace.OpLockRequest, Path: path, Mode: namespace.LockExclusive,
			Session: sess.Session, HoldTTLMillis: 10_000, LockDelayMillis: namespace.NoLockDelay})
		if r.Err != nil || len(r.Grants) != 1 {
			t.Fatalf("lock %s: %v, grants %v", path, r.Err, r.Grants)
		}
		li, err := c.Server(c.WaitLeader()).Store().Lock(r.Path)
		if err != nil {
			t.Fatal(err)
		}
		return li, li.GrantTime
	}
	// ctime of a fresh node is the time the leader stamped.
	stamp := func(name string) int64 {
		t.Helper()
		r := c.Propose(ctx, &namespace.Command{Op: namespace.OpCreate, Path: "/" + name})
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		return r.Stat.Ctime
	}
	held := func(s *server.Server, node string) bool {
		li, err := s.Store().Lock(node)
		return err == nil && li.Granted
	}

	li, granted := lock("/a")
	ft.step(leader, time.Hour)
	ft.elapse(time.Second)
	if got := stamp("after-forward-step"); got-granted < int64(time.Second) || got-granted > int64(2*time.Second) {
		t.Fatalf("after a 1h forward step and 1s elapsed, the leader stamped %v after the grant", time.Duration(got-granted))
	}
	tick(t, s)
	if !held(s, li.Node) {
		t.Fatal("a forward wall-clock step ended a 10s hold TTL after 1s")
	}

	ft.step(leader, -2*time.Hour)      // an hour behind where it started
	ft.elapse(8500 * time.Millisecond) // 9.5s since the grant
	tick(t, s)
	if !held(s, li.Node) {
		t.Fatal("the hold TTL ended before 10s passed")
	}
	ft.elapse(time.Second)
	servertest.Eventually(t, "hold TTL ends after 10.5s despite the leader's clock being 1h behind", func() error {
		if held(s, li.Node) {
			return fmt.Errorf("%s still held", li.Node)
		}
		return nil
	})

	// Leadership moves to a member whose wall clock is an hour behind.
	before := stamp("before-failover")
	for i := range 3 {
		if i != leader {
			ft.step(i, -time.Hour)
		}
	}
	li2, _ := lock("/b")
	c.Stop(leader)
	leader = c.WaitLeader()
	s = c.Server(leader)
	after := stamp("after-failover")
	if after < before {
		t.Fatalf("the new leader stamped %v, before the last committed %v", after, before)
	}
	ft.elapse(10500 * time.Millisecond)
	servertest.Eventually(t, "the new leader ends the hold TTL although its wall clock is 1h behind", func() error {
		if held(s, li2.Node) {
			return fmt.Errorf("%s still held", li2.Node)
		}
		return nil
	})
}

// tick commits a tick stamped by the leader, which fires every timer
// due by its stamp: a lock whose hold TTL has not passed in cluster time
// survives it.
func tick(t *testing.T, s *server.Server) {
	t.Helper()
	if _, err := s.Propose(context.Background(), &namespace.Command{Op: namespace.OpNoop}); err != nil {
		t.Fatal(err)
	}
}
