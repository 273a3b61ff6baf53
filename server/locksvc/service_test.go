package locksvc

import (
	"fmt"
	"testing"

	"github.com/latch-io/latch/namespace"
)

// lineStore is a lock index that knows only who is next in line.
type lineStore struct {
	Store
	next map[string]string // by path
}

func (s lineStore) NextInLine(path string) (string, bool) {
	node, ok := s.next[path]
	return node, ok
}

// A grant wakes the waiter of the request granted and, of the others,
// only the one next in line after it, telling it so; a removal tells the
// waiter why.
func TestLockObserverWakesOnlyGrantedWaiter(t *testing.T) {
	line := lineStore{next: map[string]string{}}
	l := New(Config{}, Parts{Store: line})
	var ws []*waiter
	for i := range 50 {
		ws = append(ws, l.register(fmt.Sprintf("/l/lock-x-%010d", i)))
	}
	line.next["/l"] = ws[8].node
	l.Applied([]*namespace.Result{{
		Index:  60,
		Grants: []namespace.Grant{{Node: ws[7].node, Path: "/l", Session: 1, Token: 60}},
		Events: []namespace.Event{
			{Type: namespace.EventDeleted, Path: ws[3].node, Rev: 60},
			{Type: namespace.EventLockGranted, Path: ws[7].node, Rev: 60},
		},
	}})
	for i, w := range ws {
		woken := len(w.notify) == 1
		granted, token, gone := w.state()
		switch i {
		case 7:
			if !woken || !granted || token != 60 || gone != "" {
				t.Fatalf("granted waiter: woken %v granted %v token %d gone %q", woken, granted, token, gone)
			}
		case 3:
			if !woken || granted || gone != GoneDeleted {
				t.Fatalf("removed waiter: woken %v granted %v gone %q", woken, granted, gone)
			}
		case 8:
			if !woken || granted || gone != "" || !w.isNext() {
				t.Fatalf("waiter next in line: woken %v granted %v gone %q next %v", woken, granted, gone, w.isNext())
			}
		default:
			if woken || granted || gone != "" || w.isNext() {
				t.Fatalf("waiter %d woken by another's grant (next %v)", i, w.isNext())
			}
		}
	}
	if len(l.wake) != 1 {
		t.Fatal("a grant did not wake the tick loop")
	}
	// A held lock lost: the precise reason replaces "deleted".
	l.Applied([]*namespace.Result{{Index: 61, Events: []namespace.Event{
		{Type: namespace.EventDeleted, Path: ws[7].node, Rev: 61},
		{Type: namespace.EventLockLost, Path: ws[7].node, Rev: 61},
	}}})
	if _, _, gone := ws[7].state(); gone != GoneLost {
		t.Fatalf("lost lock reported as %q", gone)
	}
	for _, w := range ws {
		l.unregister(w)
	}
	if n := l.WaiterCount(); n != 0 {
		t.Fatalf("%d waiters left", n)
	}
}
