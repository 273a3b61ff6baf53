package watch

import (
	"fmt"

	"github.com/latch-io/latch/session"
)

// The byte caps' names: the latchd flags that set them, named when a cap
// ends a watch (they "refuse" by ending it with a Resync), and the metric
// labels of their use.
const (
	CapBacklogBytes = "max-watch-backlog-bytes"
	CapBytesPerConn = "max-watch-bytes-per-conn"
)

// EventOverhead is what an event costs against the byte caps besides its
// path: the queue entry and what its encoding adds in a frame.
const EventOverhead = 48

// MinCapBytes is the least a byte cap may be: a frame's worth of events
// of long paths, so that a cap never resyncs every watch at once.
const MinCapBytes = 64 << 10

// Budget is the bytes of watch events held for one connection's watches,
// guarded by the hub's lock. A connection owns one (its zero value) and
// gives it to NewWatcher for each of its watches.
type Budget struct {
	bytes    int
	watchers int
}

// eventBytes is what ev counts against the byte caps.
func eventBytes(ev *session.WatchEvent) int { return len(ev.Path) + EventOverhead }

// eventsBytes sums eventBytes over evs.
func eventsBytes(evs []session.WatchEvent) int {
	n := 0
	for i := range evs {
		n += eventBytes(&evs[i])
	}
	return n
}

// overLocked names the byte cap that size more bytes for w would pass
// (counting the hub's resyncs), or "".
func (h *Hub) overLocked(w *Watcher, size int) string {
	switch {
	case h.backlog+size > h.maxBacklog:
		h.backlogResyncs++
		return fmt.Sprintf("watch resynced: the watches of all clients hold %d bytes of events not yet read, the cap of %d (latchd --%s)",
			h.backlog, h.maxBacklog, CapBacklogBytes)
	case w.budget != nil && w.budget.bytes+size > h.maxConnBytes:
		h.connResyncs++
		return fmt.Sprintf("watch resynced: this connection's watches hold %d bytes of events not yet read, the cap of %d (latchd --%s)",
			w.budget.bytes, h.maxConnBytes, CapBytesPerConn)
	}
	return ""
}

// chargeLocked adds n bytes (n < 0 gives them back) to the hub's total
// and w's connection budget; the caller keeps w.queued and w.inflight.
func (h *Hub) chargeLocked(w *Watcher, n int) {
	h.backlog += n
	if w.budget != nil {
		w.budget.bytes += n
	}
}

// Sent gives back the bytes of events w's writer took and has now sent
// (a frame of them): a writer blocked on a slow client keeps counting
// what it still holds. A writer that never calls Sent gives them back at
// its next Take.
func (h *Hub) Sent(w *Watcher, events []session.WatchEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := min(eventsBytes(events), w.inflight)
	w.inflight -= n
	h.chargeLocked(w, -n)
}

// BacklogStats returns the bytes of events queued for (or being written
// to) watches, and the watches resynced because a byte cap was reached:
// the hub's total, and a connection's (metrics).
func (h *Hub) BacklogStats() (bytes int, resyncs, connResyncs uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.backlog, h.backlogResyncs, h.connResyncs
}

// BusiestConn returns the most bytes one connection's watches hold.
func (h *Hub) BusiestConn() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := 0
	for b := range h.budgets {
		m = max(m, b.bytes)
	}
	return m
}

// Reason names the cap that finished w, "" when none did: its writer
// sends it next to the final Resync.
func (h *Hub) Reason(w *Watcher) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return w.why
}
