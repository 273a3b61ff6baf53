package locksvc

import (
	"slices"
	"sync"

	"github.com/latch-io/latch/namespace"
)

// maxListedLocks bounds a LockQueue answer; More says the list was cut.
const maxListedLocks = 10000

// tickBurst is how many ticks the leader proposes back to back (grants
// left over from full batches) before it pauses for ExpiryTick, a guard
// against a loop that would make no progress.
const tickBurst = 1000

// Service serves the lock requests of one member.
type Service struct {
	cfg Config
	p   Parts

	mu      sync.Mutex
	waiters map[string]map[*waiter]struct{} // by request node
	held    map[string]*connLocks           // granted requests followed, by node
	conns   map[Conn]*connLocks

	wake chan struct{} // capacity 1: an applied batch may have moved NextTimer

	moved []string // Applied's: lock paths whose queue moved in a batch (FSM goroutine only)
}

// New returns the lock service of a member. The member feeds it every
// applied batch (Applied), runs RunTimers, routes the lock requests to
// its handlers and tells it of connections closed (ConnClosed).
func New(cfg Config, p Parts) *Service {
	return &Service{cfg: cfg, p: p, waiters: map[string]map[*waiter]struct{}{}, wake: make(chan struct{}, 1),
		held: map[string]*connLocks{}, conns: map[Conn]*connLocks{}}
}

// waiter is one acquisition's view of its request: granted (with
// the token) and then gone, with the reason. The observer writes it, the
// acquisition reads it after notify.
type waiter struct {
	node   string
	notify chan struct{} // capacity 1

	mu      sync.Mutex
	granted bool
	token   uint64
	gone    string // why the request went away; "" while it lives
	next    bool   // the request is next in line (see setNext)
}

func (w *waiter) signal() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

func (w *waiter) setGranted(token uint64) {
	w.mu.Lock()
	if !w.granted && w.gone == "" {
		w.granted, w.token = true, token
	}
	w.mu.Unlock()
	w.signal()
}

// setGone records why the request went away. A later, more precise
// reason (released, lost) replaces "deleted": the node's Deleted event
// comes first in a command's events.
func (w *waiter) setGone(why string) {
	w.mu.Lock()
	if w.gone == "" || w.gone == GoneDeleted {
		w.gone = why
	}
	w.mu.Unlock()
	w.signal()
}

// setNext records that the request became next in line: only a release
// or withdrawal ahead of it stands between it and its grant, so its
// client should watch the leader closely from now on (doc.go).
func (w *waiter) setNext() {
	w.mu.Lock()
	was := w.next
	w.next = true
	w.mu.Unlock()
	if !was {
		w.signal()
	}
}

func (w *waiter) isNext() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next
}

func (w *waiter) state() (granted bool, token uint64, gone string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.granted, w.token, w.gone
}

// Applied wakes the waiters of the requests a batch granted or removed,
// and the tick loop when a batch may have brought NextTimer forward (a
// grant with a hold TTL, a lock lost into lock-delay, grants left over, a
// session ended with nodes left to delete).
// It runs on the FSM goroutine and never blocks.
func (l *Service) Applied(results []*namespace.Result) {
	wake := false
	l.mu.Lock()
	watching := len(l.waiters) > 0
	following := len(l.held) > 0
	var deleted []string // followed nodes deleted by the result at hand
	moved := l.moved[:0]
	for _, r := range results {
		deleted = deleted[:0]
		if len(r.Grants) > 0 {
			wake = true
			if watching {
				for _, g := range r.Grants {
					for w := range l.waiters[g.Node] {
						w.setGranted(g.Token)
					}
					moved = appendPath(moved, namespace.Parent(g.Node))
				}
			}
		}
		for i := range r.Events {
			ev := &r.Events[i]
			var why string
			switch ev.Type {
			case namespace.EventLockLost:
				wake, why = true, GoneLost
			case namespace.EventLockReleased:
				why = GoneReleased
			case namespace.EventDeleted:
				why = GoneDeleted
			case namespace.EventSessionClosed, namespace.EventSessionExpired:
				// Its nodes beyond the first chunk go in ticks.
				wake = true
				continue
			default:
				continue
			}
			if watching {
				for w := range l.waiters[ev.Path] {
					w.setGone(why)
				}
				// A request that ended may have been ahead of a waiter.
				moved = appendPath(moved, namespace.Parent(ev.Path))
			}
			switch {
			case !following:
			case why == GoneDeleted:
				// A deleted request node gets its precise reason later
				// in the same command's events, when it has one.
				if _, ok := l.held[ev.Path]; ok {
					deleted = append(deleted, ev.Path)
				}
			default:
				l.gone(ev.Path, why)
			}
		}
		for _, node := range deleted {
			if _, ok := l.held[node]; ok {
				l.gone(node, GoneDeleted)
			}
		}
	}
	l.mu.Unlock()
	l.moved = moved
	l.tellNext(moved)
	if wake {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// appendPath adds p to paths unless it is the last one added: a batch's
// results mostly move one queue after another.
func appendPath(paths []string, p string) []string {
	if n := len(paths); n > 0 && paths[n-1] == p {
		return paths
	}
	return append(paths, p)
}

// tellNext tells the waiters (of this member) of the requests next in
// line on the paths whose queues moved. It costs a lookup per path, not
// per waiter: the waiters further back hear nothing until their turn
// comes near.
func (l *Service) tellNext(paths []string) {
	if len(paths) > 1 {
		slices.Sort(paths)
		paths = slices.Compact(paths)
	}
	for _, p := range paths {
		node, ok := l.p.Store.NextInLine(p)
		if !ok {
			continue
		}
		l.mu.Lock()
		for w := range l.waiters[node] {
			w.setNext()
		}
		l.mu.Unlock()
	}
}

func (l *Service) register(node string) *waiter {
	w := &waiter{node: node, notify: make(chan struct{}, 1)}
	l.mu.Lock()
	set := l.waiters[node]
	if set == nil {
		set = map[*waiter]struct{}{}
		l.waiters[node] = set
	}
	set[w] = struct{}{}
	l.mu.Unlock()
	return w
}

func (l *Service) unregister(w *waiter) {
	l.mu.Lock()
	if set := l.waiters[w.node]; set != nil {
		delete(set, w)
		if len(set) == 0 {
			delete(l.waiters, w.node)
		}
	}
	l.mu.Unlock()
}

// WaiterCount is the number of lock streams registered (tests).
func (l *Service) WaiterCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, set := range l.waiters {
		n += len(set)
	}
	return n
}
