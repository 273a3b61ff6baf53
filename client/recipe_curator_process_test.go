package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/latch-io/latch/server/proc"
)

// TestCuratorRecipesLeaderKilled runs Queue, Counter and DoubleBarrier
// against three real latchd processes and SIGKILLs the leader in the
// middle of each (restarting it after, so the next has three members):
// every queue item is delivered exactly once, the counter loses no
// increment, and the double barrier releases all of its live
// participants or none.
func TestCuratorRecipesLeaderKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := proc.StartCluster(t, 3)
	c.WaitLeader(t)
	var cls []*Client
	for range 3 {
		cls = append(cls, dialProcCluster(t, c, 5*time.Second))
	}
	killLeader := func(t *testing.T) (restart func()) {
		li := c.WaitLeader(t)
		c.Nodes[li].Kill(t)
		return func() {
			c.Nodes[li].Restart(t)
			c.Nodes[li].WaitReady(t)
			c.WaitLeader(t)
		}
	}
	// waitFor polls n() until it reaches want, failing after proc's wait.
	waitFor := func(t *testing.T, what string, n func() int, want int) {
		t.Helper()
		proc.Eventually(t, what, func() error {
			if got := n(); got < want {
				return fmt.Errorf("%d of %d", got, want)
			}
			return nil
		})
	}

	t.Run("Queue", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var h queueHistory
		stopPut := make(chan struct{})
		var producers, consumers sync.WaitGroup
		var mu sync.Mutex
		taken := 0
		for p := range 2 {
			q := NewQueue(cls[0].Session(), "/curator/queue")
			producers.Add(1)
			go func() {
				defer producers.Done()
				for i := 0; ; i++ {
					select {
					case <-stopPut:
						return
					default:
					}
					item := fmt.Sprintf("p%d-%d", p, i)
					pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
					_, err := q.Put(pctx, []byte(item))
					pcancel()
					h.put(item, err)
				}
			}()
		}
		cctx, stopTake := context.WithCancel(ctx)
		for k := range 3 {
			q := NewQueue(cls[1+k%2].Session(), "/curator/queue")
			consumers.Add(1)
			go func() {
				defer consumers.Done()
				for cctx.Err() == nil {
					data, err := q.Take(cctx)
					if errors.Is(err, context.Canceled) && cctx.Err() != nil {
						return // stopped, nothing taken
					}
					h.take(string(data), err)
					mu.Lock()
					taken++
					mu.Unlock()
				}
			}()
		}
		count := func() int { mu.Lock(); defer mu.Unlock(); return taken }
		waitFor(t, "items taken before the kill", count, 50)
		restart := killLeader(t) // puts and takes in flight
		defer restart()          // the next part needs three members again
		before := count()
		waitFor(t, "items taken after the kill", count, before+50)
		close(stopPut)
		producers.Wait()
		// Drain: consumers go on until the queue is empty.
		proc.Eventually(t, "queue drained", func() error {
			n, err := NewQueue(cls[0].Session(), "/curator/queue").Len(ctx)
			if err != nil || n > 0 {
				return fmt.Errorf("%d items left (%v)", n, err)
			}
			return nil
		})
		stopTake()
		consumers.Wait()
		h.mu.Lock()
		t.Logf("queue: %d puts acknowledged, %d unknown, %d failed; %d taken, %d takes unknown, %d failed %v",
			len(h.acked), len(h.maybe), h.failedPuts, len(h.taken), h.unknownTakes, h.failedTakes, h.takeErrs)
		h.mu.Unlock()
		if err := h.check(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("Counter", func(t *testing.T) {
		ctx := context.Background()
		var h counterHistory
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		done := 0
		for g := range 4 {
			k := NewCounter(cls[g%3], "/curator/counter")
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					actx, cancel := context.WithTimeout(ctx, 10*time.Second)
					v, err := k.Add(actx, 1)
					cancel()
					h.record(v, err)
					if err == nil {
						mu.Lock()
						done++
						mu.Unlock()
					}
				}
			}()
		}
		count := func() int { mu.Lock(); defer mu.Unlock(); return done }
		waitFor(t, "increments before the kill", count, 100)
		restart := killLeader(t)
		defer restart()
		before := count()
		waitFor(t, "increments after the kill", count, before+100)
		close(stop)
		wg.Wait()
		final, err := NewCounter(cls[2], "/curator/counter").Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("counter: final %d, %d acknowledged, %d unknown, %d failed", final, len(h.values), h.unknown, h.failed)
		if err := h.check(final); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("DoubleBarrier", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*proc.WaitTimeout)
		defer cancel()
		const path = "/curator/barrier"
		participants := func() int {
			kids, _ := cls[0].Children(ctx, path)
			n := 0
			for _, k := range kids {
				if len(k) > len(dbParticipant) && k[:len(dbParticipant)] == dbParticipant {
					n++
				}
			}
			return n
		}
		ready := func() bool {
			ok, _, err := cls[0].Exists(ctx, path+"/"+dbReady)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		type result struct {
			who string
			err error
		}
		results := make(chan result, 8)
		enter := func(who string, s *Session) *DoubleBarrier {
			b := NewDoubleBarrier(s, path, 4)
			go func() { results <- result{who, b.Enter(ctx)} }()
			return b
		}
		// A, B and D enter a barrier for four; D's session ends before
		// the barrier is full: nobody may pass on its account.
		sd, err := cls[2].NewSession(ctx, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		bs := map[string]*DoubleBarrier{"A": enter("A", cls[0].Session()), "B": enter("B", cls[1].Session())}
		enter("D", sd)
		waitFor(t, "three participants", participants, 3)
		if err := sd.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if r := wait(t, "D's Enter after its session closed", results); r.who != "D" || r.err == nil {
			t.Fatalf("%s's Enter = %v, want D's to fail", r.who, r.err)
		}
		restart := killLeader(t) // the barrier waits through a failover
		se, err := cls[2].NewSession(ctx, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		bs["E"] = enter("E", se)
		waitFor(t, "A, B and E", participants, 3)
		if ready() {
			t.Fatal("released with three live participants of four")
		}
		bs["F"] = enter("F", cls[2].Session())
		for range 4 { // all four are released
			if r := wait(t, "Enter", results); r.err != nil {
				t.Fatalf("%s's Enter = %v", r.who, r.err)
			}
		}
		restart()
		errs := make(chan error, 4)
		for _, b := range bs {
			go func() { errs <- b.Leave(ctx) }()
		}
		for range 4 {
			if err := wait(t, "Leave", errs); err != nil {
				t.Fatal(err)
			}
		}
		if n := participants(); n != 0 || ready() {
			t.Fatalf("after Leave: %d participants, ready %v", n, ready())
		}
	})
}
