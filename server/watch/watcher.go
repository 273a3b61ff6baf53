package watch

import (
	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// Watcher is one registered watch. Its queue and state are guarded by the
// hub's lock; Notify wakes its writer.
type Watcher struct {
	path    string
	kind    session.WatchKind
	oneShot bool
	from    uint64 // deliver only events after this revision

	notify chan struct{} // capacity 1

	queue  []session.WatchEvent
	queued int // bytes of queue (eventBytes)
	// inflight: bytes of the events the writer took and has not sent.
	inflight int
	// budget is the connection's, nil for a watch no connection owns
	// (the HTTP API's: only the hub's total bounds those).
	budget *Budget
	// done: the hub sends nothing more; the writer sends what is queued
	// (a Resync last when it overflowed) and ends the stream.
	done       bool
	registered bool
	// why names the cap that finished the watch, "" otherwise.
	why string
}

// NewWatcher returns a watch of kind on path for Hub.Register: from 0
// starts at the current revision, otherwise after revision from. A
// one-shot watch ends after its first event. budget is the connection's
// (Budget), nil for a watch no connection owns.
func NewWatcher(path string, kind session.WatchKind, from uint64, oneShot bool, budget *Budget) *Watcher {
	return &Watcher{path: path, kind: kind, from: from, oneShot: oneShot, budget: budget, notify: make(chan struct{}, 1)}
}

// Notify receives when the hub queued events for the watch or finished
// it: its writer then calls Hub.Take.
func (w *Watcher) Notify() <-chan struct{} { return w.notify }

func (w *Watcher) wake() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// isWatchable reports whether a watch can report t: node events, and
// lock events (for watches with WatchLocks). Session events carry no path.
func isWatchable(t namespace.EventType) bool { return t.IsNodeEvent() || t.IsLockEvent() }

// watchedAt is the path whose non-recursive watchers may want ev: the
// node's, or for a lock event (whose Path is the request node) the locked
// path's.
func watchedAt(ev *namespace.Event) string {
	if ev.Type.IsLockEvent() {
		return namespace.Parent(ev.Path)
	}
	return ev.Path
}

// matches reports whether a non-recursive watcher on watchedAt(ev) wants
// ev.
func (w *Watcher) matches(ev *namespace.Event) bool {
	if ev.Type.IsLockEvent() {
		return w.kind&session.WatchLocks != 0
	}
	switch ev.Type {
	case namespace.EventDataChanged:
		return w.kind&session.WatchData != 0
	case namespace.EventCreated, namespace.EventDeleted:
		return w.kind&(session.WatchData|session.WatchExists) != 0
	case namespace.EventChildrenChanged:
		return w.kind&session.WatchChildren != 0
	}
	return false
}

// within reports whether p is root or lies at or below it.
func within(p, root string) bool {
	if root == "/" || p == root {
		return true
	}
	return len(p) > len(root) && p[:len(root)] == root && p[len(root)] == '/'
}

// wants reports whether w, on any path, wants ev (used for replay).
func (w *Watcher) wants(ev *namespace.Event) bool {
	if w.kind&session.WatchRecursive != 0 {
		return within(ev.Path, w.path) && (!ev.Type.IsLockEvent() || w.kind&session.WatchLocks != 0)
	}
	return watchedAt(ev) == w.path && w.matches(ev)
}

func wireEvent(ev *namespace.Event) session.WatchEvent {
	we := session.WatchEvent{Type: ev.Type, Path: ev.Path, Rev: ev.Rev, Session: ev.Session}
	if l := ev.Lock; l != nil {
		we.Token, we.Mode, we.Cause = l.Token, session.LockMode(l.Mode), l.Cause
		we.Waiter, we.WaiterSession = l.Waiter, l.WaiterSession
	}
	return we
}
