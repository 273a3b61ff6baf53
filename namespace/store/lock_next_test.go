package store

import (
	"testing"

	"github.com/latch-io/latch/namespace"
)

// NextInLine names the first request of a queue that cannot run yet:
// the one the next release grants. A shared request behind a held shared
// lock runs at once, so it is never next; an exclusive one queued between
// them is, and the shared one behind it comes next after its grant.
func TestLockNextInLine(t *testing.T) {
	h := newLockHarness(t, namespace.DefaultLimits())
	a, b, c, d := h.session(), h.session(), h.session(), h.session()
	next := func(want string) {
		t.Helper()
		node, ok := h.s.NextInLine("/l")
		if got := map[bool]string{true: node}[ok]; got != want {
			t.Fatalf("next in line %q, want %q", got, want)
		}
	}
	next("")
	s1 := h.lock(a, "/l", namespace.LockShared, nil).Path
	s2 := h.lock(b, "/l", namespace.LockShared, nil).Path
	next("") // both shared requests run
	x := h.lock(c, "/l", namespace.LockExclusive, nil).Path
	s3 := h.lock(d, "/l", namespace.LockShared, nil).Path
	next(x)
	h.apply(&namespace.Command{Op: namespace.OpLockRelease, Path: s1, Session: a})
	next(x) // s2 still holds
	h.apply(&namespace.Command{Op: namespace.OpLockRelease, Path: s2, Session: b})
	next(s3) // x holds now
	h.apply(&namespace.Command{Op: namespace.OpLockRelease, Path: x, Session: c})
	next("")
	h.apply(&namespace.Command{Op: namespace.OpLockRelease, Path: s3, Session: d})
	next("")
}
