package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/servertest"
)

// nextLeader returns the observation's next report.
func nextLeader(t *testing.T, ch <-chan LeaderInfo) LeaderInfo {
	t.Helper()
	select {
	case li, ok := <-ch:
		if !ok {
			t.Fatal("observation ended")
		}
		return li
	case <-time.After(servertest.WaitTimeout):
		t.Fatal("no leader report")
	}
	return LeaderInfo{}
}

// TestRecipes runs the election, semaphore and barrier tests on one
// three-member cluster.
func TestRecipes(t *testing.T) {
	tc := startLockCluster(t, 3)
	c1, c2, c3 := tc.dial(3*time.Second), tc.dial(3*time.Second), tc.dial(3*time.Second)

	t.Run("Election", func(t *testing.T) {
		ctx := testCtx(t)
		obs := c3.ObserveLeader(ctx, "/elect")
		if li := nextLeader(t, obs); !li.None {
			t.Fatalf("first report %+v, want no leader", li)
		}
		if _, _, err := c3.Leader(ctx, "/elect"); !errors.Is(err, ErrNoElectionLeader) {
			t.Fatalf("Leader with nobody campaigning = %v", err)
		}
		e1 := NewElection(c1.Session(), "/elect")
		if err := e1.Campaign(ctx, []byte("a")); err != nil {
			t.Fatal(err)
		}
		li := nextLeader(t, obs)
		if li.None || string(li.Value) != "a" || li.Term != e1.Term() || li.Term == 0 {
			t.Fatalf("report %+v, want a at term %d", li, e1.Term())
		}
		if v, term, err := c3.Leader(ctx, "/elect"); err != nil || string(v) != "a" || term != e1.Term() {
			t.Fatalf("Leader = %q %d %v", v, term, err)
		}
		s2, err := c2.NewSession(ctx, 3*time.Second) // expired below
		if err != nil {
			t.Fatal(err)
		}
		e2 := NewElection(s2, "/elect")
		won2 := lockAsync(ctx, func(ctx context.Context) error { return e2.Campaign(ctx, []byte("b")) })
		waitQueue(t, c3, "/elect", "second candidate queued", queueShape(true, false))
		if err := e1.Proclaim(ctx, []byte("a2")); err != nil {
			t.Fatal(err)
		}
		if li2 := nextLeader(t, obs); string(li2.Value) != "a2" || li2.Term != li.Term {
			t.Fatalf("after Proclaim %+v", li2)
		}
		notDone(t, won2, "second campaign")
		if err := e2.Proclaim(ctx, []byte("x")); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("Proclaim by a candidate = %v", err)
		}
		if err := e1.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		done(t, won2, "second campaign")
		li3 := nextLeader(t, obs)
		if string(li3.Value) != "b" || li3.Term <= li.Term || li3.Term != e2.Term() {
			t.Fatalf("after Resign %+v (first term %d)", li3, li.Term)
		}

		// The leader's session expires: the election has no leader for
		// the lock-delay, then the next candidate leads.
		s3, err := c3.NewSession(ctx, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer s3.Close(ctx)
		e3 := NewElection(s3, "/elect")
		won3 := lockAsync(ctx, func(ctx context.Context) error { return e3.Campaign(ctx, []byte("c")) })
		waitQueue(t, c3, "/elect", "third candidate queued", queueShape(true, false))
		tc.Propose(ctx, &namespace.Command{Op: namespace.OpSessionExpire, Sessions: []uint64{s2.ID()}})
		if li := nextLeader(t, obs); !li.None {
			t.Fatalf("report during lock-delay %+v, want no leader", li)
		}
		select {
		case <-e2.Lost():
		case <-time.After(servertest.WaitTimeout):
			t.Fatal("the expired leader's Lost did not close")
		}
		done(t, won3, "third campaign")
		li4 := nextLeader(t, obs)
		if string(li4.Value) != "c" || li4.Term <= li3.Term {
			t.Fatalf("after expiry %+v (previous term %d)", li4, li3.Term)
		}
		if err := e3.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if li := nextLeader(t, obs); !li.None {
			t.Fatalf("after the last Resign %+v", li)
		}
	})

	t.Run("Semaphore", func(t *testing.T) {
		ctx := testCtx(t)
		a, b := NewSemaphore(c1.Session(), "/sem", 2), NewSemaphore(c2.Session(), "/sem", 2)
		if err := a.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		s3, err := c3.NewSession(ctx, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer s3.Close(ctx)
		if err := NewSemaphore(s3, "/sem", 2).TryAcquire(ctx); !errors.Is(err, ErrLocked) {
			t.Fatalf("TryAcquire of a full semaphore = %v", err)
		}
		if names, err := c3.Children(ctx, "/sem"); err != nil || len(names) != 2 {
			t.Fatalf("after a failed TryAcquire: %v %v, want the two holders' nodes", names, err)
		}
		c, d := NewSemaphore(c3.Session(), "/sem", 2), NewSemaphore(s3, "/sem", 2)
		cl := lockAsync(ctx, c.Acquire)
		servertest.Eventually(t, "third waits", func() error {
			names, err := c3.Children(ctx, "/sem")
			if err == nil && len(names) != 3 {
				err = errors.New("not 3 nodes yet")
			}
			return err
		})
		dl := lockAsync(ctx, d.Acquire)
		servertest.Eventually(t, "fourth waits", func() error {
			names, err := c3.Children(ctx, "/sem")
			if err == nil && len(names) != 4 {
				err = errors.New("not 4 nodes yet")
			}
			return err
		})
		notDone(t, cl, "third Acquire")
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		done(t, cl, "third Acquire") // FIFO: the third, not the fourth
		notDone(t, dl, "fourth Acquire")
		if err := b.Release(ctx); err != nil {
			t.Fatal(err)
		}
		done(t, dl, "fourth Acquire")
		for _, m := range []*Semaphore{c, d} {
			if err := m.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Release(ctx); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("Release of a released semaphore = %v", err)
		}
	})

	t.Run("Barrier", func(t *testing.T) {
		ctx := testCtx(t)
		holder := NewBarrier(c1, c1.Session(), "/barriers/start")
		if err := NewBarrier(c2, nil, "/barriers/start").Wait(ctx); err != nil {
			t.Fatalf("Wait on a barrier that is down: %v", err)
		}
		if err := holder.Hold(ctx); err != nil {
			t.Fatal(err)
		}
		if err := NewBarrier(c2, c2.Session(), "/barriers/start").Hold(ctx); !errors.Is(err, ErrNodeExists) {
			t.Fatalf("second Hold = %v", err)
		}
		w1 := lockAsync(ctx, NewBarrier(c2, nil, "/barriers/start").Wait)
		w2 := lockAsync(ctx, NewBarrier(c3, nil, "/barriers/start").Wait)
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if err := NewBarrier(c3, nil, "/barriers/start").Wait(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Wait on a held barrier = %v", err)
		}
		notDone(t, w1, "Wait")
		if err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		done(t, w1, "Wait")
		done(t, w2, "Wait")
		// A holder whose session ends lowers the barrier.
		s, err := c1.NewSession(ctx, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := NewBarrier(c1, s, "/barriers/start").Hold(ctx); err != nil {
			t.Fatal(err)
		}
		w3 := lockAsync(ctx, NewBarrier(c2, nil, "/barriers/start").Wait)
		if err := s.Close(ctx); err != nil {
			t.Fatal(err)
		}
		done(t, w3, "Wait after the holder's session closed")
	})
}
