package server

import (
	"math"
	"sort"
	"sync"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// applyObservers fans every applied batch out to several observers, in
// order, on the FSM goroutine.
type applyObservers []ApplyObserver

func (o applyObservers) Applied(results []*namespace.Result) {
	for _, obs := range o {
		obs.Applied(results)
	}
}

// applyObservers returns what the FSM reports to: the watch hub, the lease
// keeper, the server's other observers (see observe), and the user's
// observer (may be nil).
func (s *Server) applyObservers(user ApplyObserver) ApplyObserver {
	obs := applyObservers{s.front.hub, s.front.keep}
	obs = append(obs, s.front.observers...)
	if user != nil {
		obs = append(obs, user)
	}
	return obs
}

// observe adds o to the observers of applied batches (for server parts
// such as locks that push what Apply produced to clients). Call before
// Start.
func (f *front) observe(o ApplyObserver) {
	f.observers = append(f.observers, o)
	f.s.fsm.observer = f.s.applyObservers(f.s.cfg.Observer)
}

// watchHub delivers namespace events to watches. It keeps the most recent
// events in a ring so that a watch can start from a past revision, and
// indexes watchers by path so that routing an event costs one lookup per
// ancestor of its path, not a scan of all watchers.
//
// Registration (with its replay) and delivery happen under one lock, and
// each watcher has a FIFO queue: a watch sees every event after its start
// revision once, in revision order. A queue is bounded; a watcher that
// falls behind it is closed with a Resync.
//
// Lock events (granted, released, lost, contended; Path: the request
// node) share the ring and the order of node events, and go only to the
// watchers that asked for them (WatchLocks): those of the locked path
// (the node's parent) and the recursive ones above it.
type watchHub struct {
	restores func() uint64 // the FSM's snapshot install count
	applied  func() uint64 // the namespace's applied index

	mu       sync.Mutex
	ring     []namespace.Event // circular, oldest at head
	head, n  int
	base     uint64 // every watchable event with Rev > base is in the ring
	rev      uint64 // latest revision applied
	restored uint64 // restores seen
	bufSize  int

	// backlog counts the events queued for, or being written to, every
	// watcher; a push beyond maxBacklog finishes that watcher with a
	// Resync, as a full queue does (Config.MaxWatchBacklog).
	backlog        int
	maxBacklog     int
	backlogResyncs uint64

	exact     map[string]map[*watcher]struct{} // non-recursive watchers by path
	recursive map[string]map[*watcher]struct{} // recursive watchers by path
	nwatchers int
}

func newWatchHub(history, bufSize int, applied, restores func() uint64) *watchHub {
	return &watchHub{
		restores:   restores,
		applied:    applied,
		ring:       make([]namespace.Event, history),
		base:       applied(),
		rev:        applied(),
		restored:   restores(),
		bufSize:    bufSize,
		maxBacklog: math.MaxInt,
		exact:      map[string]map[*watcher]struct{}{},
		recursive:  map[string]map[*watcher]struct{}{},
	}
}

// watcher is one registered watch. Its queue and state are guarded by the
// hub's lock; notify wakes the stream writer.
type watcher struct {
	path    string
	kind    session.WatchKind
	oneShot bool
	from    uint64 // deliver only events after this revision

	notify chan struct{} // capacity 1

	queue    []session.WatchEvent
	inflight int // events taken by the writer and not yet sent
	// done: the hub sends nothing more; the writer sends what is queued
	// (a Resync last when it overflowed) and ends the stream.
	done       bool
	registered bool
}

func newWatcher(path string, kind session.WatchKind, from uint64, oneShot bool) *watcher {
	return &watcher{path: path, kind: kind, from: from, oneShot: oneShot, notify: make(chan struct{}, 1)}
}

func (w *watcher) wake() {
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// isWatchable reports whether a watch can report t: node events, and
// lock events (for watches with WatchLocks). Session events carry no path.
func isWatchable(t namespace.EventType) bool {
	switch t {
	case namespace.EventCreated, namespace.EventDeleted, namespace.EventDataChanged, namespace.EventChildrenChanged:
		return true
	}
	return t.IsLockEvent()
}

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
func (w *watcher) matches(ev *namespace.Event) bool {
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
func (w *watcher) wants(ev *namespace.Event) bool {
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

// Applied records a batch's watchable events and hands them to the watchers
// that want them. It runs on the FSM goroutine and never blocks on a
// watcher: a full queue closes that watcher instead.
func (h *watchHub) Applied(results []*namespace.Result) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(results) > 0 {
		h.checkRestoreLocked(results[0].Index - 1)
	}
	for _, r := range results {
		h.rev = max(h.rev, r.Index)
		for i := range r.Events {
			ev := &r.Events[i]
			if !isWatchable(ev.Type) {
				continue
			}
			h.recordLocked(*ev)
			h.routeLocked(ev)
		}
	}
}

// checkRestoreLocked notices that the FSM installed a snapshot since the
// hub last looked: the events in between were never reported, so the
// history is gone and every watcher must resync at rev (at most the
// revision the restored state reflects).
func (h *watchHub) checkRestoreLocked(rev uint64) {
	n := h.restores()
	if n == h.restored {
		return
	}
	h.restored = n
	h.head, h.n = 0, 0
	h.base, h.rev = rev, rev
	resync := session.WatchEvent{Type: session.EventResync, Rev: rev}
	for _, set := range []map[string]map[*watcher]struct{}{h.exact, h.recursive} {
		for _, ws := range set {
			for w := range ws {
				w.from = min(w.from, rev)
				h.pushLocked(w, resync)
			}
		}
	}
}

func (h *watchHub) recordLocked(ev namespace.Event) {
	if len(h.ring) == 0 {
		h.base = ev.Rev
		return
	}
	if h.n == len(h.ring) {
		h.base = h.ring[h.head].Rev
		h.head = (h.head + 1) % len(h.ring)
		h.n--
	}
	h.ring[(h.head+h.n)%len(h.ring)] = ev
	h.n++
}

func (h *watchHub) routeLocked(ev *namespace.Event) {
	for w := range h.exact[watchedAt(ev)] {
		if ev.Rev > w.from && w.matches(ev) {
			h.pushLocked(w, wireEvent(ev))
		}
	}
	lock := ev.Type.IsLockEvent()
	for p := ev.Path; ; p = namespace.Parent(p) {
		for w := range h.recursive[p] {
			if ev.Rev > w.from && (!lock || w.kind&session.WatchLocks != 0) {
				h.pushLocked(w, wireEvent(ev))
			}
		}
		if p == "/" {
			break
		}
	}
}

// pushLocked queues ev for w. A one-shot watcher is finished by its first
// event; a watcher whose queue is full is finished with a Resync that
// names the revision before the oldest event it did not get, so that the
// client resumes without a gap.
func (h *watchHub) pushLocked(w *watcher, ev session.WatchEvent) {
	if w.done {
		return
	}
	full := len(w.queue) >= h.bufSize
	if ev.Type != session.EventResync && (full || h.backlog >= h.maxBacklog) {
		if !full {
			h.backlogResyncs++
		}
		oldest := ev.Rev
		if len(w.queue) > 0 {
			oldest = w.queue[0].Rev
		}
		h.backlog -= len(w.queue) - 1
		w.queue = append(w.queue[:0], session.WatchEvent{Type: session.EventResync, Rev: oldest - 1})
		h.finishLocked(w)
		return
	}
	h.backlog++
	w.queue = append(w.queue, ev)
	if w.oneShot && ev.Type != session.EventResync {
		h.finishLocked(w)
		return
	}
	w.wake()
}

// finishLocked stops routing events to w and wakes its writer to end.
func (h *watchHub) finishLocked(w *watcher) {
	w.done = true
	h.unindexLocked(w)
	w.wake()
}

// register starts w and returns the revision the watch starts after. With
// w.from set, the events after it still in the ring are queued first;
// when they are gone (or would not fit the queue) a Resync at the current
// revision is queued instead, and the watch goes on from there.
func (h *watchHub) register(w *watcher) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checkRestoreLocked(h.applied())
	if w.from == 0 {
		w.from = h.rev
		h.indexLocked(w)
		return w.from
	}
	start := w.from
	if w.from < h.base || !h.replayLocked(w) {
		w.queue = append(w.queue[:0], session.WatchEvent{Type: session.EventResync, Rev: h.rev})
		w.from = h.rev
	}
	if w.oneShot && len(w.queue) > 0 {
		if w.queue[0].Type != session.EventResync {
			w.queue = w.queue[:1]
			w.done = true
		}
	}
	h.backlog += len(w.queue)
	if !w.done {
		h.indexLocked(w)
	}
	w.wake()
	return start
}

// replayLocked queues the retained events after w.from that w wants, and
// reports false when they do not fit its queue.
func (h *watchHub) replayLocked(w *watcher) bool {
	at := func(i int) *namespace.Event { return &h.ring[(h.head+i)%len(h.ring)] }
	first := sort.Search(h.n, func(i int) bool { return at(i).Rev > w.from })
	for i := first; i < h.n; i++ {
		ev := at(i)
		if !w.wants(ev) {
			continue
		}
		if len(w.queue) == h.bufSize || h.backlog+len(w.queue) >= h.maxBacklog {
			w.queue = w.queue[:0]
			return false
		}
		w.queue = append(w.queue, wireEvent(ev))
		if w.oneShot {
			break
		}
	}
	return true
}

func (h *watchHub) indexLocked(w *watcher) {
	idx := h.exact
	if w.kind&session.WatchRecursive != 0 {
		idx = h.recursive
	}
	set := idx[w.path]
	if set == nil {
		set = map[*watcher]struct{}{}
		idx[w.path] = set
	}
	set[w] = struct{}{}
	w.registered = true
	h.nwatchers++
}

func (h *watchHub) unindexLocked(w *watcher) {
	if !w.registered {
		return
	}
	w.registered = false
	h.nwatchers--
	idx := h.exact
	if w.kind&session.WatchRecursive != 0 {
		idx = h.recursive
	}
	set := idx[w.path]
	delete(set, w)
	if len(set) == 0 {
		delete(idx, w.path)
	}
}

// unregister removes w (its stream ended).
func (h *watchHub) unregister(w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.done = true
	h.unindexLocked(w)
	h.backlog -= len(w.queue) + w.inflight
	w.queue, w.inflight = nil, 0
}

// sent gives back the backlog of n events w's writer took and sent.
func (h *watchHub) sent(w *watcher, n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.inflight -= n
	h.backlog -= n
}

// backlogStats returns the events queued for watches and the watches
// resynced because the backlog was full (metrics).
func (h *watchHub) backlogStats() (queued int, resyncs uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.backlog, h.backlogResyncs
}

// take moves w's queued events into buf (reused) and reports whether the
// watch is finished once they are sent.
func (h *watchHub) take(w *watcher, buf []session.WatchEvent) ([]session.WatchEvent, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	// Swap rather than copy: the writer sends one slice while the hub
	// fills the other.
	buf, w.queue = w.queue, buf[:0]
	w.inflight += len(buf)
	return buf, w.done
}

// watchers is the number of watches registered.
func (h *watchHub) watchers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nwatchers
}
