package server

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/latch-io/latch/server/lease"
	"github.com/latch-io/latch/server/quicfront"
	"github.com/latch-io/latch/server/watch"
	"github.com/latch-io/latch/session"
)

// Caps on what one identity, or all clients together, can make the leader
// hold. Each is a Config field, a latchd flag, and two gauges on /metrics
// (latch_cap_limit, latch_cap_used: for per-identity caps the use of the
// busiest identity) plus its refusals in latch_refused_total; the label
// is the flag's name.
// They are the leader's in-memory bookkeeping, not Apply's: no command's
// outcome depends on them, so members need not agree on them.
const (
	DefaultMaxSessions           = 100000
	DefaultMaxAnonymousSessions  = 10000
	DefaultMaxWatchesPerIdentity = 10000
)

// Cap names: the latchd flags that set them, also the metric labels.
const (
	capSessions            = lease.CapSessions
	capSessionsPerIdentity = lease.CapSessionsPerIdentity
	capAnonymousSessions   = lease.CapAnonymousSessions
	capWatchesPerIdentity  = "max-watches-per-identity"
	// The watch byte caps "refuse" by ending a watch with a Resync.
	capWatchBacklogBytes = watch.CapBacklogBytes
	capWatchBytesPerConn = watch.CapBytesPerConn
)

// capRefusals counts refusals per cap.
type capRefusals struct {
	sessions, perIdentity, anonymous, watches atomic.Uint64
}

func (r *capRefusals) counter(name string) *atomic.Uint64 {
	switch name {
	case capSessions:
		return &r.sessions
	case capSessionsPerIdentity:
		return &r.perIdentity
	case capAnonymousSessions:
		return &r.anonymous
	}
	return &r.watches
}

// capError is a refusal that names the cap and the flag that raises it.
func capError(sentinel error, name string, limit int, who string) error {
	return fmt.Errorf("%w: %s reached the cap of %d (latchd --%s)", sentinel, who, limit, name)
}

// anonymousHost is what OpSessionOpen records as the session's host: the
// client's, when it has no certificate (the quota key needs it after a
// leader change); nothing otherwise.
func anonymousHost(c *quicfront.Conn) string {
	if c.Identity() == "" {
		return c.Host()
	}
	return ""
}

// watchCounts counts open watches per identity across connections.
type watchCounts struct {
	mu sync.Mutex
	n  map[string]int
}

// add counts a watch of identity, refusing it at limit.
func (w *watchCounts) add(identity string, limit int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n == nil {
		w.n = map[string]int{}
	}
	if w.n[identity] >= limit {
		return capError(session.ErrTooManyWatches, capWatchesPerIdentity, limit, fmt.Sprintf("identity %q", identity))
	}
	w.n[identity]++
	return nil
}

func (w *watchCounts) remove(identity string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n[identity]--; w.n[identity] <= 0 {
		delete(w.n, identity)
	}
}

// busiest returns the most watches one identity holds.
func (w *watchCounts) busiest() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := 0
	for _, n := range w.n {
		m = max(m, n)
	}
	return m
}

// capUse is one cap's limit and use, for metrics.
type capUse struct {
	name        string
	limit, used int
	refusals    uint64
}

// caps reports every cap of this member's front.
func (f *front) caps() []capUse {
	total, busiest, anon := f.keep.SessionUse()
	cfg := &f.s.cfg
	r := &f.capRefusals
	watchBytes, backlogResyncs, connResyncs := f.hub.BacklogStats()
	return []capUse{
		{capWatchBacklogBytes, cfg.MaxWatchBacklogBytes, watchBytes, backlogResyncs},
		{capWatchBytesPerConn, cfg.MaxWatchBytesPerConn, f.hub.BusiestConn(), connResyncs},
		{capSessions, cfg.MaxSessions, total, r.sessions.Load()},
		{capSessionsPerIdentity, cfg.MaxSessionsPerIdentity, busiest, r.perIdentity.Load()},
		{capAnonymousSessions, cfg.MaxAnonymousSessions, anon, r.anonymous.Load()},
		{capWatchesPerIdentity, cfg.MaxWatchesPerIdentity, f.watchesBy.busiest(), r.watches.Load()},
	}
}
