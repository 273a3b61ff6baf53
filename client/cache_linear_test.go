package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/latch-io/latch/server/servertest"
)

// The client cache must be linearizable with the writes: a history of
// Cached reads, linearizable reads and writes from other clients, across
// leader changes, is checked with porcupine against a register per key.
// The same checker, on a history made with one invalidation skipped on the
// leader (a planted bug), must fail.

// regInput is one operation on a key's register: a write of value, or a
// read (value is then what it returned; "" for absent).
type regInput struct {
	write bool
	value string
}

type regOutput struct {
	value   string // read: what it returned
	unknown bool   // write: the outcome is unknown
}

var regModel = porcupine.Model{
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(string), input.(regInput), output.(regOutput)
		if in.write {
			return true, in.value // an unknown write may have applied: porcupine may place it last
		}
		return out.value == s, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		if in.write {
			return fmt.Sprintf("set %q (unknown=%v)", in.value, out.unknown)
		}
		return fmt.Sprintf("read %q", out.value)
	},
}

// regHistory records operations per key; times are nanoseconds since base.
type regHistory struct {
	base time.Time
	mu   sync.Mutex
	ops  map[string][]porcupine.Operation
}

func newRegHistory() *regHistory {
	return &regHistory{base: time.Now(), ops: map[string][]porcupine.Operation{}}
}

func (h *regHistory) now() int64 { return int64(time.Since(h.base)) }

func (h *regHistory) add(key string, client int, in regInput, out regOutput, call, ret int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops[key] = append(h.ops[key], porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
}

// waitOps returns once n more operations were recorded.
func (h *regHistory) waitOps(t *testing.T, n int) {
	t.Helper()
	count := func() int {
		h.mu.Lock()
		defer h.mu.Unlock()
		total := 0
		for _, ops := range h.ops {
			total += len(ops)
		}
		return total
	}
	want := count() + n
	servertest.Eventually(t, fmt.Sprintf("%d operations recorded", want), func() error {
		if got := count(); got < want {
			return fmt.Errorf("%d recorded", got)
		}
		return nil
	})
}

// check runs porcupine on every key's history.
func (h *regHistory) check(t *testing.T) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, ops := range h.ops {
		res, info := porcupine.CheckOperationsVerbose(regModel, ops, 30*time.Second)
		switch res {
		case porcupine.Ok:
		case porcupine.Unknown:
			return fmt.Errorf("%s: porcupine timed out on %d operations", key, len(ops))
		default:
			logStaleReads(t, ops)
			path := filepath.Join(t.TempDir(), "cache.html")
			if err := porcupine.VisualizePath(regModel, info, path); err == nil {
				t.Logf("porcupine visualization: %s", path)
			}
			return fmt.Errorf("%s: the history of %d operations is not linearizable", key, len(ops))
		}
	}
	return nil
}

// set records a Set of key to value by c. A write whose outcome is unknown
// (a leader change while it committed) may take effect any time after its
// call: it returns at the end of the history.
func (h *regHistory) set(ctx context.Context, c *Client, client int, key, value string) error {
	call := h.now()
	_, err := c.Set(ctx, key, []byte(value))
	ret := h.now()
	switch {
	case err == nil:
		h.add(key, client, regInput{write: true, value: value}, regOutput{}, call, ret)
	case errors.Is(err, ErrUnknownOutcome) || ctx.Err() != nil:
		h.add(key, client, regInput{write: true, value: value}, regOutput{unknown: true}, call, math.MaxInt64)
	default:
		return err
	}
	return nil
}

// get records a read of key by c (Cached or linearizable).
func (h *regHistory) get(ctx context.Context, c *Client, client int, key string, opts ...ReadOption) error {
	call := h.now()
	data, _, err := c.Get(ctx, key, opts...)
	ret := h.now()
	switch {
	case err == nil:
		h.add(key, client, regInput{}, regOutput{value: string(data)}, call, ret)
	case errors.Is(err, ErrNoNode):
		h.add(key, client, regInput{}, regOutput{}, call, ret)
	case ctx.Err() != nil:
	default:
		return err
	}
	return nil
}

// TestCachedReadsLinearizable runs writers, Cached readers and a
// linearizable reader on separate clients over two keys while the leader
// is stopped and restarted twice, and checks the history.
func TestCachedReadsLinearizable(t *testing.T) {
	tc := startCluster(t, 3, clusterOptions{})
	keys := []string{"/lin-a", "/lin-b"}
	h := newRegHistory()
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()

	const writers, cachedReaders = 2, 3
	var clients []*Client
	for range writers + cachedReaders + 1 {
		clients = append(clients, tc.dial(5*time.Second))
	}
	for _, k := range keys {
		if _, err := clients[0].Create(ctx, k, nil); err != nil { // "", the model's initial value
			t.Fatal(err)
		}
	}
	var (
		wg     sync.WaitGroup
		stop   atomic.Bool
		failed = make(chan error, len(clients))
		seq    atomic.Int64
		// writing is held by each write: a leader is stopped between
		// writes. hashicorp/raft can leave the future of a write that
		// was committed but not yet applied unanswered when it shuts
		// down (Close then waits for the handler forever).
		writing sync.RWMutex
	)
	defer func() { // also when the test fails: no worker outlives it
		stop.Store(true)
		cancel()
		wg.Wait()
	}()
	for i, c := range clients {
		wg.Go(func() {
			for n := 0; !stop.Load() && ctx.Err() == nil; n++ {
				key := keys[n%len(keys)]
				var err error
				switch {
				case i < writers:
					writing.RLock()
					err = h.set(ctx, c, i, key, fmt.Sprintf("w%d-%d", i, seq.Add(1)))
					writing.RUnlock()
				case i < writers+cachedReaders:
					err = h.get(ctx, c, i, key, Cached())
					// Paces the load, so the writers (and porcupine) keep
					// up with readers that need no round trip.
					time.Sleep(time.Millisecond)
				default:
					err = h.get(ctx, c, i, key)
				}
				if err != nil {
					failed <- fmt.Errorf("client %d: %w", i, err)
					return
				}
			}
		})
	}
	// Two leader changes: stop the leader, let the others elect, restart
	// it; some history before, between and after.
	for range 2 {
		h.waitOps(t, 300)
		leader := tc.WaitLeader()
		writing.Lock()
		tc.Stop(leader)
		writing.Unlock()
		tc.WaitLeader()
		tc.Restart(leader)
	}
	h.waitOps(t, 300)
	stop.Store(true)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("the workload ran out of time: %v", ctx.Err())
	}
	close(failed)
	for err := range failed {
		t.Fatal(err)
	}
	var hits, invalidations uint64
	for _, c := range clients[writers : writers+cachedReaders] {
		st := c.CacheStats()
		hits, invalidations = hits+st.Hits, invalidations+st.Invalidations
	}
	if hits == 0 || invalidations == 0 {
		t.Fatalf("cached readers had %d hits and %d invalidations: the history does not test the cache", hits, invalidations)
	}
	t.Logf("%d cache hits, %d invalidations", hits, invalidations)
	if err := h.check(t); err != nil {
		t.Fatal(err)
	}
}

// TestCacheCheckerCatchesSkippedInvalidation plants the bug the cache
// exists to avoid: the leader skips one invalidation. The write returns,
// the Cached read still answers the old value, and the checker says so.
func TestCacheCheckerCatchesSkippedInvalidation(t *testing.T) {
	tc := startCluster(t, 3, clusterOptions{})
	reader, writer := tc.dial(5*time.Second), tc.dial(5*time.Second)
	ctx := testCtx(t)
	h := newRegHistory()
	if _, err := writer.Create(ctx, "/k", nil); err != nil {
		t.Fatal(err)
	}
	if err := h.set(ctx, writer, 1, "/k", "old"); err != nil {
		t.Fatal(err)
	}
	waitCacheHit(t, reader, "/k")
	if err := h.get(ctx, reader, 0, "/k", Cached()); err != nil {
		t.Fatal(err)
	}
	if err := h.check(t); err != nil {
		t.Fatalf("before the planted bug: %v", err)
	}
	tc.Server(tc.WaitLeader()).SkipCacheInvalidationsForTest(1)
	if err := h.set(ctx, writer, 1, "/k", "new"); err != nil {
		t.Fatal(err)
	}
	if err := h.get(ctx, reader, 0, "/k", Cached()); err != nil {
		t.Fatal(err)
	}
	if err := h.check(t); err == nil {
		t.Fatal("the checker passed a history where a cached read returned a value overwritten before it began")
	} else {
		t.Logf("caught: %v", err)
	}
}

// logStaleReads names the reads that returned a value overwritten by a
// write that completed before they began: what a failed check is about.
func logStaleReads(t *testing.T, ops []porcupine.Operation) {
	writes := map[string]porcupine.Operation{}
	for _, o := range ops {
		if in := o.Input.(regInput); in.write {
			writes[in.value] = o
		}
	}
	n := 0
	for _, r := range ops {
		if r.Input.(regInput).write {
			continue
		}
		v := r.Output.(regOutput).value
		wv, ok := writes[v]
		for _, w2 := range ops {
			in := w2.Input.(regInput)
			if !in.write || in.value == v || w2.Output.(regOutput).unknown {
				continue
			}
			if w2.Return < r.Call && (!ok || wv.Return < w2.Call) {
				if n < 10 {
					t.Logf("stale: client %d read %q [%d,%d]; write %q by %d [%d,%d] completed before; value's write [%d,%d]",
						r.ClientId, v, r.Call/1e6, r.Return/1e6, in.value, w2.ClientId, w2.Call/1e6, w2.Return/1e6, wv.Call/1e6, wv.Return/1e6)
				}
				n++
				break
			}
		}
	}
	t.Logf("%d stale reads", n)
}
