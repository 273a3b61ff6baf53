package server

// Locks over the wire. The lock state machine lives in namespace
// (OpLockRequest, OpLockCancel, OpLockRelease, OpLockRenew; grants happen
// inside Apply); this file connects it to clients and to time:
//
//   - MsgLockCall proposes a request as a unary call (on the mux stream)
//     and answers at once: granted, with the token, or queued, and the
//     client then waits on a MsgLock{Node} stream. A free lock, the
//     common case, costs no stream of its own.
//   - MsgLock proposes a request and streams its progress. Waiters are
//     keyed by their request node in a registry fed by the apply observer:
//     a grant wakes exactly the stream of the request granted, never the
//     other waiters (no herd).
//   - The stream ends at the grant: a held lock is not a request in
//     flight and costs no request slot, no stream and no goroutine. The
//     member follows it for the connection it was granted to (held, by
//     node) and, when it goes away (hold TTL, node deleted, session
//     ended, released), queues a notice for that connection, delivered on
//     its one MsgLockNotices stream, so a client learns at once that it
//     lost a lock. A held lock costs the member two map entries. A release
//     that the following connection asked for itself (MsgLockRelease) is
//     no news to it: its answer says so, and no notice follows.
//   - A stream the client resets while its connection lives is a client
//     that gave up: the request is withdrawn, or the lock released when
//     the grant raced the reset (OpLockCancel does both). A reset that
//     comes after the grant was written finds the stream ended: the
//     member cannot tell it from a delivered grant, so the client, which
//     knows it did not deliver the grant, withdraws the request itself
//     (MsgLockRelease) whenever a Lock gives up. A lost
//     connection leaves the request in place: the client re-attaches to
//     it with MsgLock{Node} on whichever member leads next, keeping its
//     place in the queue; if the client is gone for good, its session
//     expires and takes the request with it.
//   - A request whose proposal commits after its stream ended is
//     withdrawn at once: nobody learned its node. (A client that lost
//     the answer to a failover sends it again with its RequestID and gets
//     the request the cluster has.)
//   - The leader proposes ticks (OpNoop stamped with its clock) when the
//     namespace's NextTimer is due, so lock-delays end and hold TTLs
//     expire through the log. The loop wakes after every applied batch
//     that granted or lost a lock and runs only while this member is the
//     ready leader.
//
// Lock-delay defaults and bounds are the replicated cluster settings
// DefaultLockDelayMillis (5s) and MaxLockDelayMillis (60s); settings.go.

import (
	"sync"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// maxListedLocks bounds a LockQueue answer; More says the list was cut.
const maxListedLocks = 10000

// tickBurst is how many ticks the leader proposes back to back (grants
// left over from full batches) before it pauses for ExpiryTick, a guard
// against a loop that would make no progress.
const tickBurst = 1000

// lockService serves the lock requests of one member.
type lockService struct {
	f *front

	mu      sync.Mutex
	waiters map[string]map[*lockWaiter]struct{} // by request node
	held    map[string]*connLocks               // granted requests followed, by node
	conns   map[*clientConn]*connLocks

	wake chan struct{} // capacity 1: an applied batch may have moved NextTimer
}

// lockWaiter is one MsgLock stream's view of its request: granted (with
// the token) and then gone, with the reason. The observer writes it, the
// stream's handler reads it after notify.
type lockWaiter struct {
	node   string
	notify chan struct{} // capacity 1

	mu      sync.Mutex
	granted bool
	token   uint64
	gone    string // why the request went away; "" while it lives
}

func (w *lockWaiter) signal() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

func (w *lockWaiter) setGranted(token uint64) {
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
func (w *lockWaiter) setGone(why string) {
	w.mu.Lock()
	if w.gone == "" || w.gone == goneDeleted {
		w.gone = why
	}
	w.mu.Unlock()
	w.signal()
}

func (w *lockWaiter) state() (granted bool, token uint64, gone string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.granted, w.token, w.gone
}

// registerLocks installs the lock handlers and the lock observer; the
// caller (register) runs before Start.
func (f *front) registerLocks() {
	l := &lockService{f: f, waiters: map[string]map[*lockWaiter]struct{}{}, wake: make(chan struct{}, 1),
		held: map[string]*connLocks{}, conns: map[*clientConn]*connLocks{}}
	f.locks = l
	f.handleStream(session.MsgLock, l.serveLock)
	f.handleStream(session.MsgLockNotices, l.serveNotices)
	f.handleUnary(session.MsgLockCall, l.call)
	f.handleUnary(session.MsgLockRelease, l.release)
	f.handleUnary(session.MsgLockRenew, l.renew)
	f.handleUnary(session.MsgCheckSequencer, l.checkSequencer)
	f.handleUnary(session.MsgLockQueue, l.queue)
	// openFront installs f.observers after register.
	f.observers = append(f.observers, l)
}

// Applied wakes the waiters of the requests a batch granted or removed,
// and the tick loop when a batch may have brought NextTimer forward (a
// grant with a hold TTL, a lock lost into lock-delay, grants left over, a
// session ended with nodes left to delete).
// It runs on the FSM goroutine and never blocks.
func (l *lockService) Applied(results []*namespace.Result) {
	wake := false
	l.mu.Lock()
	watching := len(l.waiters) > 0
	following := len(l.held) > 0
	var deleted []string // followed nodes deleted by the result at hand
	for _, r := range results {
		deleted = deleted[:0]
		if len(r.Grants) > 0 {
			wake = true
			if watching {
				for _, g := range r.Grants {
					for w := range l.waiters[g.Node] {
						w.setGranted(g.Token)
					}
				}
			}
		}
		for i := range r.Events {
			ev := &r.Events[i]
			var why string
			switch ev.Type {
			case namespace.EventLockLost:
				wake, why = true, goneLost
			case namespace.EventLockReleased:
				why = goneReleased
			case namespace.EventDeleted:
				why = goneDeleted
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
			}
			switch {
			case !following:
			case why == goneDeleted:
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
				l.gone(node, goneDeleted)
			}
		}
	}
	l.mu.Unlock()
	if wake {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

func (l *lockService) register(node string) *lockWaiter {
	w := &lockWaiter{node: node, notify: make(chan struct{}, 1)}
	l.mu.Lock()
	set := l.waiters[node]
	if set == nil {
		set = map[*lockWaiter]struct{}{}
		l.waiters[node] = set
	}
	set[w] = struct{}{}
	l.mu.Unlock()
	return w
}

func (l *lockService) unregister(w *lockWaiter) {
	l.mu.Lock()
	if set := l.waiters[w.node]; set != nil {
		delete(set, w)
		if len(set) == 0 {
			delete(l.waiters, w.node)
		}
	}
	l.mu.Unlock()
}

// waiterCount is the number of lock streams registered (tests).
func (l *lockService) waiterCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, set := range l.waiters {
		n += len(set)
	}
	return n
}
