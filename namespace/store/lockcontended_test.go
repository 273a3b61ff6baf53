package store

import (
	"testing"

	"github.com/latch-io/latch/namespace"
)

// TestLockContendedBound: a writer queued behind more shared holders than
// one walk looks at tells the oldest maxContendedScan of them, once each,
// at its own revision; a reader queued behind the writer tells nobody
// (it conflicts with no holder).
func TestLockContendedBound(t *testing.T) {
	h := newLockHarness(t, namespace.DefaultLimits())
	const readers = maxContendedScan + 10
	var holders []string
	for range readers {
		holders = append(holders, h.lock(h.session(), "/big", namespace.LockShared, nil).Path)
	}
	w := h.session()
	res := h.lock(w, "/big", namespace.LockExclusive, nil)
	var told []string
	for _, ev := range res.Events {
		if ev.Type != namespace.EventLockContended {
			continue
		}
		if l := ev.Lock; l == nil || l.Waiter != res.Path || l.WaiterSession != w || ev.Rev != res.Index || l.Token == 0 || l.Mode != namespace.LockShared {
			t.Fatalf("contended event %+v for waiter %s", ev, res.Path)
		}
		told = append(told, ev.Path)
	}
	if len(told) != maxContendedScan {
		t.Fatalf("%d holders told, want %d", len(told), maxContendedScan)
	}
	for i, p := range told {
		if p != holders[i] {
			t.Fatalf("holder %d told is %s, want %s (the oldest first)", i, p, holders[i])
		}
	}
	late := h.lock(h.session(), "/big", namespace.LockShared, nil)
	for _, ev := range late.Events {
		if ev.Type == namespace.EventLockContended {
			t.Fatalf("a reader behind a waiting writer told %+v", ev)
		}
	}
}
