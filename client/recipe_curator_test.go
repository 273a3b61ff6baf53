package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/latch-io/latch/server/servertest"
)

// Queue, DoubleBarrier and Counter on one in-process cluster; the
// real-process tests with a leader killed in the middle are in
// recipe_curator_process_test.go.
func TestCuratorRecipes(t *testing.T) {
	tc := startLockCluster(t, 3)
	c1, c2 := tc.dial(3*time.Second), tc.dial(3*time.Second)

	t.Run("Counter", func(t *testing.T) {
		ctx := testCtx(t)
		k1, k2 := NewCounter(c1, "/cnt/a"), NewCounter(c2, "/cnt/a")
		if v, err := k1.Get(ctx); err != nil || v != 0 {
			t.Fatalf("Get of a missing counter = %d, %v", v, err)
		}
		var h counterHistory
		var wg sync.WaitGroup
		for g := range 4 {
			k := []*Counter{k1, k2}[g%2]
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 25 {
					v, err := k.Add(ctx, 1)
					h.record(v, err)
				}
			}()
		}
		wg.Wait()
		final, err := k1.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.check(final); err != nil || final != 100 || h.unknown != 0 {
			t.Fatalf("final %d after 100 Adds (%d unknown): %v", final, h.unknown, err)
		}
		if ok, err := k2.CompareAndSet(ctx, 99, 5); err != nil || ok {
			t.Fatalf("CompareAndSet from a stale value = %v, %v", ok, err)
		}
		if ok, err := k2.CompareAndSet(ctx, 100, 5); err != nil || !ok {
			t.Fatalf("CompareAndSet = %v, %v", ok, err)
		}
		if v, err := k1.Add(ctx, -7); err != nil || v != -2 {
			t.Fatalf("Add(-7) after 5 = %d, %v", v, err)
		}
		if _, err := c1.Create(ctx, "/cnt/b", []byte("not json")); err != nil {
			t.Fatal(err)
		}
		if _, err := NewCounter(c1, "/cnt/b").Add(ctx, 1); !errors.Is(err, ErrNotCounter) {
			t.Fatalf("Add on a node that holds no counter = %v", err)
		}
	})

	t.Run("Queue", func(t *testing.T) {
		ctx := testCtx(t)
		producer, consumer := NewQueue(c1.Session(), "/q/jobs"), NewQueue(c2.Session(), "/q/jobs")
		for i := range 3 {
			if _, err := producer.Put(ctx, []byte(fmt.Sprint("item", i))); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := consumer.Len(ctx); err != nil || n != 3 {
			t.Fatalf("Len = %d, %v", n, err)
		}
		for i := range 3 {
			data, err := consumer.Take(ctx)
			if err != nil || string(data) != fmt.Sprint("item", i) {
				t.Fatalf("Take %d = %q, %v (FIFO)", i, data, err)
			}
		}
		// An empty queue blocks Take until a Put.
		got := make(chan []byte, 1)
		go func() {
			data, err := consumer.Take(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- data
		}()
		select {
		case data := <-got:
			t.Fatalf("Take of an empty queue returned %q", data)
		default:
		}
		if _, err := producer.Put(ctx, []byte("late")); err != nil {
			t.Fatal(err)
		}
		if data := wait(t, "Take of a later Put", got); string(data) != "late" {
			t.Fatalf("Take = %q", data)
		}
		// Several consumers, each item once; markers are gone after.
		var qh queueHistory
		for i := range 40 {
			if _, err := producer.Put(ctx, []byte(fmt.Sprint("x", i))); err != nil {
				t.Fatal(err)
			}
			qh.put(fmt.Sprint("x", i), nil)
		}
		var wg sync.WaitGroup
		for g := range 4 {
			q := NewQueue([]*Client{c1, c2}[g%2].Session(), "/q/jobs")
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
					data, err := q.Take(tctx)
					cancel()
					if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrUnknownOutcome) {
						// Drained, or only slow (a loaded machine): the
						// queue's length tells, not the timeout.
						if n, err := q.Len(ctx); err == nil && n == 0 {
							return
						}
						continue
					}
					qh.take(string(data), err)
				}
			}()
		}
		wg.Wait()
		if err := qh.check(); err != nil {
			t.Fatal(err)
		}
		// A lost take's answer is decided by the marker's take id, not by
		// its session: another Queue of the same session took this item.
		item, err := producer.Put(ctx, []byte("shared"))
		if err != nil {
			t.Fatal(err)
		}
		name := item[len("/q/jobs/"):]
		marker := "/q/jobs/" + queueTaken + name
		if _, err := c2.Session().Multi(ctx, OpDelete(item), OpCreate(marker, []byte("other take"), Ephemeral())); err != nil {
			t.Fatal(err)
		}
		if mine, again, err := consumer.resolve(ctx, item, marker, []byte("this take")); err != nil || mine || again {
			t.Fatalf("resolve of a take another Queue of the session made = mine %v, again %v, %v", mine, again, err)
		}
		if mine, _, err := consumer.resolve(ctx, item, marker, []byte("other take")); err != nil || !mine {
			t.Fatalf("resolve of the take that made the marker = mine %v, %v", mine, err)
		}
		if err := c2.Session().Delete(ctx, marker); err != nil {
			t.Fatal(err)
		}
		servertest.Eventually(t, "markers deleted", func() error {
			kids, err := c1.Children(ctx, "/q/jobs")
			if err != nil || len(kids) != 0 {
				return fmt.Errorf("children %v, %v", kids, err)
			}
			return nil
		})
	})

	t.Run("DoubleBarrier", func(t *testing.T) {
		ctx := testCtx(t)
		s3, err := c2.NewSession(ctx, 3*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		sessions := []*Session{c1.Session(), c2.Session(), s3}
		// Two of three enter and give up: nobody is released, and
		// nothing is left behind.
		for _, s := range sessions[:2] {
			b := NewDoubleBarrier(s, "/db/round", 3)
			tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			err := b.Enter(tctx)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Enter of 1 of 3 = %v", err)
			}
		}
		if kids, err := c1.Children(ctx, "/db/round"); err != nil || len(kids) != 0 {
			t.Fatalf("after withdrawals: %v, %v", kids, err)
		}
		// Three enter: all are released; all leave together.
		var entered, left sync.WaitGroup
		errs := make(chan error, 6)
		for _, s := range sessions {
			b := NewDoubleBarrier(s, "/db/round", 3)
			entered.Add(1)
			left.Add(1)
			go func() {
				defer left.Done()
				err := b.Enter(ctx)
				entered.Done()
				errs <- err
				if err == nil {
					errs <- b.Leave(ctx)
				}
			}()
		}
		entered.Wait()
		left.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if kids, err := c1.Children(ctx, "/db/round"); err != nil || len(kids) != 0 {
			t.Fatalf("after Leave: %v, %v", kids, err)
		}
	})
}

// counterHistory records what Adds of 1 answered.
type counterHistory struct {
	mu      sync.Mutex
	values  []int64 // the value each acknowledged Add wrote
	unknown int     // Adds whose outcome is unknown
	failed  int     // Adds that failed otherwise (not applied)
}

func (h *counterHistory) record(v int64, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil:
		h.values = append(h.values, v)
	case errors.Is(err, ErrUnknownOutcome):
		h.unknown++
	default:
		h.failed++
	}
}

// check: with every Add adding 1 to a counter that started at 0, each
// acknowledged Add wrote a different value (two Adds that wrote the same
// value lost an increment), the final value counts every acknowledged
// Add and at most every unknown one, and each value an Add wrote is
// within it.
func (h *counterHistory) check(final int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	vs := append([]int64(nil), h.values...)
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	for i := 1; i < len(vs); i++ {
		if vs[i] == vs[i-1] {
			return fmt.Errorf("two acknowledged Adds wrote %d: an increment was lost", vs[i])
		}
	}
	if len(vs) > 0 && (vs[0] < 1 || vs[len(vs)-1] > final) {
		return fmt.Errorf("Adds wrote values from %d to %d; the final value is %d", vs[0], vs[len(vs)-1], final)
	}
	if acked := int64(len(vs)); final < acked || final > acked+int64(h.unknown) {
		return fmt.Errorf("final value %d, with %d acknowledged and %d unknown increments", final, acked, h.unknown)
	}
	return nil
}

// queueHistory records what producers put and consumers took.
type queueHistory struct {
	mu                        sync.Mutex
	acked, maybe              map[string]bool // put, acknowledged or of unknown outcome
	taken                     map[string]int
	unknownTakes, failedTakes int
	failedPuts, duplicatePuts int
	takeErrs                  []error
}

func (h *queueHistory) put(item string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.acked == nil {
		h.acked, h.maybe, h.taken = map[string]bool{}, map[string]bool{}, map[string]int{}
	}
	switch {
	case err == nil:
		h.acked[item] = true
	case errors.Is(err, ErrUnknownOutcome):
		h.maybe[item] = true
	default:
		h.failedPuts++
	}
}

func (h *queueHistory) take(item string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.taken == nil {
		h.taken = map[string]int{}
	}
	switch {
	case err == nil:
		h.taken[item]++
	case errors.Is(err, ErrUnknownOutcome):
		h.unknownTakes++
	default:
		h.failedTakes++
		h.takeErrs = append(h.takeErrs, err)
	}
}

// check: no item was taken twice; every item taken was put; every
// acknowledged item was taken, except at most one per take whose
// outcome is unknown (that take may have removed it).
func (h *queueHistory) check() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for item, n := range h.taken {
		if n > 1 {
			return fmt.Errorf("item %q taken %d times", item, n)
		}
		if !h.acked[item] && !h.maybe[item] {
			return fmt.Errorf("item %q taken but never put", item)
		}
	}
	missing := 0
	for item := range h.acked {
		if h.taken[item] == 0 {
			missing++
		}
	}
	if missing > h.unknownTakes {
		return fmt.Errorf("%d acknowledged items never taken, with %d takes of unknown outcome", missing, h.unknownTakes)
	}
	return nil
}

// The checkers fail on planted bad histories.
func TestCuratorCheckersCatchPlantedBugs(t *testing.T) {
	var q queueHistory
	for _, item := range []string{"a", "b", "c"} {
		q.put(item, nil)
		q.take(item, nil)
	}
	if err := q.check(); err != nil {
		t.Fatalf("a good queue history: %v", err)
	}
	q.take("b", nil) // planted: b delivered twice
	if err := q.check(); err == nil {
		t.Fatal("the queue checker missed an item delivered twice")
	}
	var lost queueHistory
	lost.put("a", nil)
	lost.put("b", nil)
	lost.take("a", nil)
	if err := lost.check(); err == nil {
		t.Fatal("the queue checker missed an acknowledged item never delivered")
	}
	var ghost queueHistory
	ghost.take("z", nil)
	if err := ghost.check(); err == nil {
		t.Fatal("the queue checker missed an item never put")
	}

	var k counterHistory
	for v := int64(1); v <= 3; v++ {
		k.record(v, nil)
	}
	if err := k.check(3); err != nil {
		t.Fatalf("a good counter history: %v", err)
	}
	k.record(3, nil) // planted: two Adds wrote 3
	if err := k.check(4); err == nil {
		t.Fatal("the counter checker missed a lost increment")
	}
	var short counterHistory
	short.record(1, nil)
	short.record(2, nil)
	if err := short.check(1); err == nil {
		t.Fatal("the counter checker missed a final value below the acknowledged increments")
	}
	var unk counterHistory
	unk.record(1, nil)
	unk.record(0, ErrUnknownOutcome)
	if err := unk.check(2); err != nil {
		t.Fatalf("an unknown increment that applied: %v", err)
	}
	if err := unk.check(3); err == nil {
		t.Fatal("the counter checker missed an increment applied twice")
	}
}

// TestCounterResolve: how a Counter decides the writes whose answers were
// lost, from what the node remembers.
func TestCounterResolve(t *testing.T) {
	writes := func(from, to int64) []counterWrite { // versions from..to, ids "w<version>"
		var ws []counterWrite
		for v := from; v <= to; v++ {
			ws = append(ws, counterWrite{Version: v, ID: fmt.Sprint("w", v), Value: v * 10})
		}
		return ws
	}
	for _, c := range []struct {
		name    string
		d       counterData
		ver     int64
		unknown []int64
		applied int64 // the value found applied; 0: none
		still   []int64
		err     bool
	}{
		{name: "applied, remembered", d: counterData{Writes: writes(3, 9)}, ver: 9, unknown: []int64{4}, applied: 50},
		{name: "not applied: another made its version", d: counterData{Writes: writes(3, 9)}, ver: 9, unknown: []int64{5}},
		{name: "may still be in flight", d: counterData{Writes: writes(3, 9)}, ver: 9, unknown: []int64{9}, still: []int64{9}},
		{name: "a create still in flight", ver: -1, unknown: []int64{-1}, still: []int64{-1}},
		{name: "forgotten", d: counterData{Writes: writes(20, 51)}, ver: 51, unknown: []int64{10}, err: true},
		{name: "just remembered", d: counterData{Writes: writes(20, 51)}, ver: 51, unknown: []int64{19}},
	} {
		id := "mine"
		if c.applied != 0 {
			id = fmt.Sprint("w", c.applied/10)
		}
		w, still, err := c.d.resolve(c.ver, id, c.unknown)
		switch {
		case c.err != (err != nil) || c.err && !errors.Is(err, ErrUnknownOutcome):
			t.Errorf("%s: error %v", c.name, err)
		case c.applied != 0 && (w == nil || w.Value != c.applied):
			t.Errorf("%s: applied %+v, want value %d", c.name, w, c.applied)
		case c.applied == 0 && w != nil:
			t.Errorf("%s: found applied %+v", c.name, w)
		case fmt.Sprint(still) != fmt.Sprint(c.still):
			t.Errorf("%s: still %v, want %v", c.name, still, c.still)
		}
	}
}
