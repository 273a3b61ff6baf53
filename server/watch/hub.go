package watch

import (
	"math"
	"sort"
	"sync"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// Log is the member's applied log as the hub reads it.
type Log interface {
	// AppliedIndex is the index of the last entry applied.
	AppliedIndex() uint64
	// Restores counts the snapshots installed: each one makes the
	// history before it unreachable.
	Restores() uint64
}

// Config sizes a Hub.
type Config struct {
	// History is how many events the hub keeps for watches that start
	// from a past revision.
	History int
	// Buffer is how many events one watch may have queued before it is
	// finished with a Resync.
	Buffer int
	// MaxBacklogBytes caps the bytes of events held for all watches,
	// MaxBytesPerConn those for one connection's (a Budget); 0: no cap.
	MaxBacklogBytes int
	MaxBytesPerConn int
}

// Hub delivers namespace events to watches. It keeps the most recent
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
// counts its path plus EventOverhead, against the hub's total
// (Config.MaxBacklogBytes) and its connection's (a Budget,
// Config.MaxBytesPerConn); a push beyond either finishes the watcher
// with a Resync, and the reason names the cap.
//
// Lock events (granted, released, lost, contended; Path: the request
// node) share the ring and the order of node events, and go only to the
// watchers that asked for them (WatchLocks): those of the locked path
// (the node's parent) and the recursive ones above it.
type Hub struct {
	log Log

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
	maxBacklog     int // Config.MaxBacklogBytes
	maxConnBytes   int // Config.MaxBytesPerConn
	backlogResyncs uint64
	connResyncs    uint64
	budgets        map[*Budget]struct{} // of connections with watches

	exact     map[string]map[*Watcher]struct{} // non-recursive watchers by path
	recursive map[string]map[*Watcher]struct{} // recursive watchers by path
	nwatchers int
}

// NewHub returns a hub sized by cfg that starts at log's applied index.
// Give it every applied batch (Applied) from then on.
func NewHub(cfg Config, log Log) *Hub {
	h := &Hub{
		log:          log,
		ring:         make([]namespace.Event, cfg.History),
		base:         log.AppliedIndex(),
		restored:     log.Restores(),
		bufSize:      cfg.Buffer,
		maxBacklog:   math.MaxInt,
		maxConnBytes: math.MaxInt,
		budgets:      map[*Budget]struct{}{},
		exact:        map[string]map[*Watcher]struct{}{},
		recursive:    map[string]map[*Watcher]struct{}{},
	}
	h.rev = h.base
	if cfg.MaxBacklogBytes > 0 {
		h.maxBacklog = cfg.MaxBacklogBytes
	}
	if cfg.MaxBytesPerConn > 0 {
		h.maxConnBytes = cfg.MaxBytesPerConn
	}
	return h
}

// Applied records a batch's watchable events and hands them to the watchers
// that want them. It runs on the FSM goroutine and never blocks on a
// watcher: a full queue closes that watcher instead.
func (h *Hub) Applied(results []*namespace.Result) {
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
func (h *Hub) checkRestoreLocked(rev uint64) {
	n := h.log.Restores()
	if n == h.restored {
		return
	}
	h.restored = n
	h.head, h.n = 0, 0
	h.base, h.rev = rev, rev
	resync := session.WatchEvent{Type: session.EventResync, Rev: rev}
	for _, set := range []map[string]map[*Watcher]struct{}{h.exact, h.recursive} {
		for _, ws := range set {
			for w := range ws {
				w.from = min(w.from, rev)
				h.pushLocked(w, resync)
			}
		}
	}
}

func (h *Hub) recordLocked(ev namespace.Event) {
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

func (h *Hub) routeLocked(ev *namespace.Event) {
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
func (h *Hub) pushLocked(w *Watcher, ev session.WatchEvent) {
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

// finishLocked stops routing events to w and wakes its writer to end.
func (h *Hub) finishLocked(w *Watcher) {
	w.done = true
	h.unindexLocked(w)
	w.wake()
}

// Register starts w and returns the revision the watch starts after. With
// a start revision given to NewWatcher, the events after it still in the
// ring are queued first; when they are gone (or would not fit the queue)
// a Resync at the current revision is queued instead, and the watch goes
// on from there. Every Register is followed by an Unregister.
func (h *Hub) Register(w *Watcher) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if b := w.budget; b != nil {
		b.watchers++
		h.budgets[b] = struct{}{}
	}
	h.checkRestoreLocked(h.log.AppliedIndex())
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
func (h *Hub) replayLocked(w *Watcher) bool {
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

func (h *Hub) indexLocked(w *Watcher) {
	idx := h.exact
	if w.kind&session.WatchRecursive != 0 {
		idx = h.recursive
	}
	set := idx[w.path]
	if set == nil {
		set = map[*Watcher]struct{}{}
		idx[w.path] = set
	}
	set[w] = struct{}{}
	w.registered = true
	h.nwatchers++
}

func (h *Hub) unindexLocked(w *Watcher) {
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

// Unregister removes w (its stream ended) and gives back what it held.
// A second call changes nothing.
func (h *Hub) Unregister(w *Watcher) {
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

// Take moves w's queued events into buf (reused) and reports whether the
// watch is finished once they are sent. The events count as in flight
// until Sent, or until the next Take.
func (h *Hub) Take(w *Watcher, buf []session.WatchEvent) ([]session.WatchEvent, bool) {
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

// Watchers is the number of watches registered.
func (h *Hub) Watchers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nwatchers
}
