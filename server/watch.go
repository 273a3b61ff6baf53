package server

import (
	"fmt"
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
// Memory is bounded in bytes, not events: an event of a 1000-byte path
// costs what a thousand short ones do. Each queued or in-flight event
// counts its path plus watchEventOverhead, against the hub's total
// (Config.MaxWatchBacklogBytes) and its connection's (a watchBudget,
// Config.MaxWatchBytesPerConn); a push beyond either finishes the watcher
// with a Resync, and the reason names the cap.
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

	// backlog counts the bytes of the events queued for, or being
	// written to, every watcher (eventBytes); a push beyond maxBacklog,
	// or beyond maxConnBytes on its connection's budget, finishes that
	// watcher with a Resync, as a full queue does.
	backlog        int
	maxBacklog     int // Config.MaxWatchBacklogBytes
	maxConnBytes   int // Config.MaxWatchBytesPerConn
	backlogResyncs uint64
	connResyncs    uint64
	budgets        map[*watchBudget]struct{} // of connections with watches

	exact     map[string]map[*watcher]struct{} // non-recursive watchers by path
	recursive map[string]map[*watcher]struct{} // recursive watchers by path
	nwatchers int
}

func newWatchHub(history, bufSize int, applied, restores func() uint64) *watchHub {
	return &watchHub{
		restores:     restores,
		applied:      applied,
		ring:         make([]namespace.Event, history),
		base:         applied(),
		rev:          applied(),
		restored:     restores(),
		bufSize:      bufSize,
		maxBacklog:   math.MaxInt,
		maxConnBytes: math.MaxInt,
		budgets:      map[*watchBudget]struct{}{},
		exact:        map[string]map[*watcher]struct{}{},
		recursive:    map[string]map[*watcher]struct{}{},
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

	queue  []session.WatchEvent
	queued int // bytes of queue (eventBytes)
	// inflight: bytes of the events the writer took and has not sent.
	inflight int
	// budget is the connection's, nil for a watch no connection owns
	// (the HTTP API's: only the hub's total bounds those).
	budget *watchBudget
	// done: the hub sends nothing more; the writer sends what is queued
	// (a Resync last when it overflowed) and ends the stream.
	done       bool
	registered bool
	// why names the cap that finished the watch, "" otherwise.
	why string
}

func newWatcher(path string, kind session.WatchKind, from uint64, oneShot bool) *watcher {
	return &watcher{path: path, kind: kind, from: from, oneShot: oneShot, notify: make(chan struct{}, 1)}
}

// watchBudget is the bytes of watch events held for one connection's
// watches, guarded by the hub's lock.
type watchBudget struct {
	bytes    int
	watchers int
}

// watchEventOverhead is what an event costs besides its path: the queue
// entry and what its encoding adds in a frame.
const watchEventOverhead = 48

// minWatchBytes is the least a byte cap may be: a frame's worth of
// events of long paths, so that a cap never resyncs every watch at once.
const minWatchBytes = 64 << 10

// eventBytes is what ev counts against the byte caps.
func eventBytes(ev *session.WatchEvent) int { return len(ev.Path) + watchEventOverhead }

// eventsBytes sums eventBytes over evs.
func eventsBytes(evs []session.WatchEvent) int {
	n := 0
	for i := range evs {
		n += eventBytes(&evs[i])
	}
	return n
}

func (w *watcher) wake() {
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
	size := eventBytes(&ev)
	if ev.Type != session.EventResync {
		if why := h.overLocked(w, size); why != "" || len(w.queue) >= h.bufSize {
			oldest := ev.Rev
			if len(w.queue) > 0 {
				oldest = w.queue[0].Rev
			}
			resync := session.WatchEvent{Type: session.EventResync, Rev: oldest - 1}
			h.chargeLocked(w, eventBytes(&resync)-w.queued)
			w.queue, w.queued = append(w.queue[:0], resync), eventBytes(&resync)
			w.why = why
			h.finishLocked(w)
			return
		}
	}
	h.chargeLocked(w, size)
	w.queue, w.queued = append(w.queue, ev), w.queued+size
	if w.oneShot && ev.Type != session.EventResync {
		h.finishLocked(w)
		return
	}
	w.wake()
}

// overLocked names the byte cap that size more bytes for w would pass
// (counting the hub's resyncs), or "".
func (h *watchHub) overLocked(w *watcher, size int) string {
	switch {
	case h.backlog+size > h.maxBacklog:
		h.backlogResyncs++
		return fmt.Sprintf("watch resynced: the watches of all clients hold %d bytes of events not yet read, the cap of %d (latchd --%s)",
			h.backlog, h.maxBacklog, capWatchBacklogBytes)
	case w.budget != nil && w.budget.bytes+size > h.maxConnBytes:
		h.connResyncs++
		return fmt.Sprintf("watch resynced: this connection's watches hold %d bytes of events not yet read, the cap of %d (latchd --%s)",
			w.budget.bytes, h.maxConnBytes, capWatchBytesPerConn)
	}
	return ""
}

// chargeLocked adds n bytes (n < 0 gives them back) to the hub's total
// and w's connection budget; the caller keeps w.queued and w.inflight.
func (h *watchHub) chargeLocked(w *watcher, n int) {
	h.backlog += n
	if w.budget != nil {
		w.budget.bytes += n
	}
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
	if b := w.budget; b != nil {
		b.watchers++
		h.budgets[b] = struct{}{}
	}
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
	w.queued = eventsBytes(w.queue)
	h.chargeLocked(w, w.queued)
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
	size := 0
	for i := first; i < h.n; i++ {
		ev := at(i)
		if !w.wants(ev) {
			continue
		}
		wev := wireEvent(ev)
		size += eventBytes(&wev)
		if len(w.queue) == h.bufSize || h.backlog+size > h.maxBacklog ||
			(w.budget != nil && w.budget.bytes+size > h.maxConnBytes) {
			w.queue = w.queue[:0]
			return false
		}
		w.queue = append(w.queue, wev)
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
	h.chargeLocked(w, -w.queued-w.inflight)
	w.queue, w.queued, w.inflight = nil, 0, 0
	if b := w.budget; b != nil {
		if b.watchers--; b.watchers == 0 {
			delete(h.budgets, b)
		}
		w.budget = nil // a second unregister changes nothing
	}
}

// sent gives back the bytes of events w's writer took and has now sent
// (a frame of them): a writer blocked on a slow client keeps counting
// what it still holds.
func (h *watchHub) sent(w *watcher, events []session.WatchEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := min(eventsBytes(events), w.inflight)
	w.inflight -= n
	h.chargeLocked(w, -n)
}

// backlogStats returns the bytes of events queued for (or being written
// to) watches, and the watches resynced because a byte cap was reached:
// the hub's total, and a connection's (metrics).
func (h *watchHub) backlogStats() (bytes int, resyncs, connResyncs uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.backlog, h.backlogResyncs, h.connResyncs
}

// busiestConn returns the most bytes one connection's watches hold.
func (h *watchHub) busiestConn() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := 0
	for b := range h.budgets {
		m = max(m, b.bytes)
	}
	return m
}

// reason names the cap that finished w, "" when none did.
func (h *watchHub) reason(w *watcher) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return w.why
}

// take moves w's queued events into buf (reused) and reports whether the
// watch is finished once they are sent.
func (h *watchHub) take(w *watcher, buf []session.WatchEvent) ([]session.WatchEvent, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	// The writer is back for more, so it is done with what it took last
	// time (sent or dropped as unreadable): that stops counting.
	h.chargeLocked(w, -w.inflight)
	// Swap rather than copy: the writer sends one slice while the hub
	// fills the other. What it takes now counts as in flight.
	buf, w.queue = w.queue, buf[:0]
	w.inflight, w.queued = w.queued, 0
	return buf, w.done
}

// watchers is the number of watches registered.
func (h *watchHub) watchers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nwatchers
}
