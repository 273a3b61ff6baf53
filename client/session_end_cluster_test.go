package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server"
	"github.com/latch-io/latch/server/servertest"
)

// TestCloseManyRequestsDoesNotStall closes a session holding 20,000 lock
// requests on a 3-member cluster (real raft, badger, QUIC) while another
// client keeps creating and reading nodes. The close ends the session at
// once and deletes its requests MaxLockBatch per command in leader ticks
// (namespace/session.go), so the other client's calls interleave with the
// chunks. It asserts that the close completes fully (every request gone,
// the session gone), that every call of the other client succeeded, and
// that all members end with identical state; it logs the other client's
// latencies (timing is measured, not asserted).
func TestCloseManyRequestsDoesNotStall(t *testing.T) {
	const requests = 20000
	tc := startCluster(t, 3, clusterOptions{unboundedLockRequests: true})
	// A loaded machine may move leadership: every proposal goes to the
	// leader of the moment and is retried when its outcome is unknown
	// (lock requests carry request ids, so a retry returns the first).
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	leader := tc.Server(tc.WaitLeader()) // any member's store will do for reads
	open, _, err := proposeAtLeader(ctx, tc, &namespace.Command{Op: namespace.OpSessionOpen, TTLMillis: 300_000, Secret: []byte("many")})
	if err != nil || open.Err != nil {
		t.Fatalf("open: %v %v", err, open)
	}
	big := open.Session
	const workers = 32
	var wg sync.WaitGroup
	failed := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < requests; i += workers {
				r, _, err := proposeAtLeader(ctx, tc, &namespace.Command{
					Op: namespace.OpLockRequest, Session: big, Mode: namespace.LockExclusive,
					Path: fmt.Sprintf("/many/%05d", i), RequestID: fmt.Sprintf("r%d", i),
				})
				if err == nil {
					err = r.Err
				}
				if err != nil {
					failed <- fmt.Errorf("lock request %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(failed)
	if err := <-failed; err != nil {
		t.Fatal(err)
	}
	// The member read may be a follower (or a deposed leader) that has
	// not applied the last proposals yet: wait for it, do not count early.
	servertest.Eventually(t, "the big session's requests on the member read", func() error {
		if eph, err := leader.Store().SessionEphemerals(big); err != nil || len(eph) != requests {
			return fmt.Errorf("the big session has %d requests (%v), want %d", len(eph), err, requests)
		}
		return nil
	})

	other := tc.dial(10 * time.Second)
	if _, err := other.Create(ctx, "/other", nil); err != nil {
		t.Fatal(err)
	}
	var (
		mu        sync.Mutex
		latencies []time.Duration
		stop      = make(chan struct{})
		unknown   atomic.Int64
		errs      = make(chan error, 1)
	)
	go func() {
		defer close(errs)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			p := fmt.Sprintf("/other/n%d", i)
			// Leadership may move under load: the client then reports an
			// unknown outcome (the write may have happened) and the
			// create is tried again.
			var err error
			for attempt := 0; ; attempt++ {
				_, err = other.Create(ctx, p, []byte("x"))
				if attempt > 0 && errors.Is(err, ErrNodeExists) {
					err = nil
				}
				if !errors.Is(err, ErrUnknownOutcome) || attempt == 20 {
					break
				}
				unknown.Add(1)
			}
			if err != nil {
				errs <- fmt.Errorf("create %s: %w", p, err)
				return
			}
			if data, _, err := other.Get(ctx, p); err != nil || string(data) != "x" {
				errs <- fmt.Errorf("get %s: %q, %v", p, data, err)
				return
			}
			mu.Lock()
			latencies = append(latencies, time.Since(start))
			mu.Unlock()
		}
	}()

	start := time.Now()
	r, again, err := proposeAtLeader(ctx, tc, &namespace.Command{Op: namespace.OpSessionClose, Session: big})
	if err == nil && r.Err != nil && !(errors.Is(r.Err, namespace.ErrNoSession) && again) {
		err = r.Err
	}
	if err != nil {
		t.Fatalf("close: %v", err)
	}
	closeApplied := time.Since(start)
	servertest.Eventually(t, "the closed session's requests all deleted", func() error {
		if n, err := leader.Store().SessionEphemerals(big); err != nil || len(n) != 0 {
			return fmt.Errorf("%d left (%v)", len(n), err)
		}
		return nil
	})
	allGone := time.Since(start)
	close(stop)
	if err := <-errs; err != nil {
		t.Fatalf("the other client failed while the session closed: %v", err)
	}
	mu.Lock()
	lat := slices.Clone(latencies)
	mu.Unlock()
	if len(lat) == 0 {
		t.Fatal("the other client completed no call while the session closed")
	}
	slices.Sort(lat)
	t.Logf("close of %d requests: committed in %v, all deleted in %v; other client: %d create+get pairs (%d creates retried after a leader change), p50 %v, p99 %v, max %v",
		requests, closeApplied, allGone, len(lat), unknown.Load(), lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])

	if _, err := leader.Store().Session(big); err == nil {
		t.Fatal("the closed session still exists")
	}
	if n, err := leader.Store().CountLocks(); err != nil || n.Held+n.Waiting+n.Delayed != 0 {
		t.Fatalf("lock requests left after the close: %+v (%v)", n, err)
	}
	servertest.Eventually(t, "identical state on all members", func() error {
		var first []byte
		for _, i := range tc.Running() {
			var b bytes.Buffer
			if err := tc.Server(i).Store().Dump(&b); err != nil {
				return err
			}
			if first == nil {
				first = b.Bytes()
			} else if !bytes.Equal(first, b.Bytes()) {
				return fmt.Errorf("n%d differs from n%d", i+1, tc.Running()[0]+1)
			}
		}
		return nil
	})
}

// proposeAtLeader proposes cmd at the current leader, retrying while there
// is none or the outcome is unknown (retried then says so).
func proposeAtLeader(ctx context.Context, tc *testCluster, cmd *namespace.Command) (r *namespace.Result, retried bool, err error) {
	for {
		for _, i := range tc.Running() {
			s := tc.Server(i)
			if s == nil || !s.IsLeader() {
				continue
			}
			r, err = s.Propose(ctx, cmd)
			if err == nil {
				return r, retried, nil
			}
			if !errors.Is(err, server.ErrUnknownOutcome) && !errors.Is(err, server.ErrNotLeader) {
				return nil, retried, err
			}
			retried = retried || errors.Is(err, server.ErrUnknownOutcome)
		}
		select {
		case <-ctx.Done():
			return nil, retried, ctx.Err()
		case <-time.After(20 * time.Millisecond): // waiting for a leader
		}
	}
}
