package store

import (
	"errors"
	"testing"

	"github.com/latch-io/latch/namespace"
)

// Lock requests cannot be retried safely without a name: a lost answer
// left the client guessing. A request id makes the retry return the
// request the session already has; the ids survive a restart (they are in
// the lock records); one session's live requests are capped by a cluster
// setting.
func TestLockRequestIDs(t *testing.T) {
	limits := namespace.DefaultLimits()
	limits.MaxLockRequestsPerSession = 3
	h := newLockHarness(t, limits)
	a, b := h.session(), h.session()
	withID := func(id string) func(*namespace.Command) { return func(c *namespace.Command) { c.RequestID = id } }

	first := h.lock(a, "/x", namespace.LockExclusive, withID("r1"))
	retry := h.lock(a, "/x", namespace.LockExclusive, withID("r1"))
	if retry.Path != first.Path || retry.Stat.CreateRev != first.Index || len(retry.Events) != 0 {
		t.Fatalf("retry: %s rev %d events %v, want %s rev %d and nothing new", retry.Path, retry.Stat.CreateRev, retry.Events, first.Path, first.Index)
	}
	if q, _ := h.s.LockQueue("/x"); len(q) != 1 {
		t.Fatalf("queue after a retry: %+v", q)
	}
	// Another session may use the same id; the same session may not for
	// another lock.
	if r := h.lock(b, "/y", namespace.LockExclusive, withID("r1")); r.Path == first.Path {
		t.Fatal("ids are per session")
	}
	h.index++
	if r := h.s.Apply(h.index, h.now, &namespace.Command{Op: namespace.OpLockRequest, Session: a, Path: "/z", RequestID: "r1"}); !errors.Is(r.Err, namespace.ErrBadRequestID) {
		t.Fatalf("id reused for another lock: %v", r.Err)
	}
	if node, ok, _ := h.s.LockByRequestID(a, "r1"); !ok || node != first.Path {
		t.Fatalf("LockByRequestID = %q %v", node, ok)
	}

	// The ids come back with the index after a restart.
	if err := h.s.loadLocks(); err != nil {
		t.Fatal(err)
	}
	if again := h.lock(a, "/x", namespace.LockExclusive, withID("r1")); again.Path != first.Path {
		t.Fatalf("retry after reload: %s, want %s", again.Path, first.Path)
	}

	// Released: the id names nothing, and a request with it is new.
	h.apply(&namespace.Command{Op: namespace.OpLockCancel, Session: a, Path: first.Path})
	if _, ok, _ := h.s.LockByRequestID(a, "r1"); ok {
		t.Fatal("a released request is still found by its id")
	}
	if r := h.lock(a, "/x", namespace.LockExclusive, withID("r1")); r.Path == first.Path {
		t.Fatal("a released request came back")
	}

	// The per-session cap: a holds /x; two more, then refused.
	h.lock(a, "/c1", namespace.LockExclusive, nil)
	h.lock(a, "/c2", namespace.LockExclusive, nil)
	h.index++
	if r := h.s.Apply(h.index, h.now, &namespace.Command{Op: namespace.OpLockRequest, Session: a, Path: "/c3"}); !errors.Is(r.Err, namespace.ErrTooManyLockRequests) {
		t.Fatalf("a fourth request with max 3: %v", r.Err)
	}
	// A retry of a live request is not a new one.
	h.lock(a, "/x", namespace.LockExclusive, withID("r1"))
}
