package store

import (
	"errors"
	"testing"

	"github.com/latch-io/latch/namespace"
)

// TryLock was a request then a cancel: two commits, Created and Deleted
// events for watchers, and a free lock refused when MaxLockBatch deferred
// its grant. Now one command decides: granted at once, or ErrLocked with
// nothing created.
func TestTryLockInApply(t *testing.T) {
	limits := namespace.DefaultLimits()
	limits.MaxLockBatch = 1
	h := newLockHarness(t, limits)
	a, b, c := h.session(), h.session(), h.session()
	try := func(s uint64, path string, mode namespace.LockMode) *namespace.Result {
		h.index++
		h.now += 1_000_000
		return h.s.Apply(h.index, h.now, &namespace.Command{Op: namespace.OpLockRequest, Session: s, Path: path, Mode: mode, Try: true})
	}

	// Refused: nothing created, no event, not even the missing path.
	h.lock(a, "/p", namespace.LockExclusive, nil)
	for _, tc := range []struct {
		path string
		mode namespace.LockMode
	}{{"/p", namespace.LockExclusive}, {"/p", namespace.LockShared}, {"/p/deep/child", namespace.LockShared}, {"/", namespace.LockExclusive}} {
		r := try(b, tc.path, tc.mode)
		if !errors.Is(r.Err, namespace.ErrLocked) || len(r.Events) != 0 || len(r.Grants) != 0 {
			t.Fatalf("try %s %s on a held lock: %v, events %v, grants %v", tc.mode, tc.path, r.Err, r.Events, r.Grants)
		}
	}
	if _, _, err := h.s.Get("/p/deep"); !errors.Is(err, namespace.ErrNoNode) {
		t.Fatalf("a refused try-lock created its path: %v", err)
	}
	if q, _ := h.s.LockQueue("/p"); len(q) != 1 {
		t.Fatalf("a refused try-lock queued: %+v", q)
	}

	// Shared with shared: granted.
	h.lock(a, "/s", namespace.LockShared, nil)
	if r := try(b, "/s", namespace.LockShared); r.Err != nil || len(r.Grants) != 1 {
		t.Fatalf("shared try next to a shared holder: %v %+v", r.Err, r.Grants)
	}

	// Leftover grants: two children of /p become runnable when /p goes,
	// MaxLockBatch 1 grants one per command, and a try-lock on a free
	// path is granted in its own command all the same.
	h.lock(b, "/p/c1", namespace.LockExclusive, nil)
	h.lock(c, "/p/c2", namespace.LockExclusive, nil)
	q, _ := h.s.LockQueue("/p")
	h.apply(&namespace.Command{Op: namespace.OpLockCancel, Path: q[0].Node, Session: a})
	if _, ok := h.s.NextTimer(); !ok {
		t.Fatal("no grant left over for the next command: the test does not test the batch")
	}
	r := try(a, "/free", namespace.LockExclusive)
	if r.Err != nil || len(r.Grants) == 0 || r.Grants[0].Path != "/free" || r.Grants[0].Token != h.index {
		t.Fatalf("try on a free lock with grants left over: %v %+v", r.Err, r.Grants)
	}
}
