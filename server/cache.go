package server

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/quic-go/quic-go"

	"github.com/latch-io/latch/server/quicfront"
	"github.com/latch-io/latch/server/raftnode"
	"github.com/latch-io/latch/session"
)

// The client cache, as Chubby's: a client caches node data and existence
// and the leader invalidates its copy before a write that changes the node
// is acknowledged, so a cached read is as fresh as a linearizable one.
//
//   - A client opens one cache stream per connection to the leader
//     (MsgCache) and registers a node with a Get or Exists carrying Cache
//     (it is linearizable, so served by the leader). The leader keeps, per
//     node, the streams that cache it (cacheTable), at most
//     MaxCachedPerConn nodes per stream (over it a read is answered
//     without Cached and nothing is registered).
//   - Invalidation happens where applied events are known (Applied, on the
//     FSM goroutine, for every command: writes, multis, session ends, lock
//     nodes): each node event whose path is cached queues an invalidation
//     on every stream caching it (the registration ends there) and makes a
//     flush, the set of streams that must acknowledge it. Propose then
//     waits for the flush of its index before it returns: a writer hears
//     of its write only when every cache that held the node dropped it, or
//     when that cache's lease ran out. A write nobody caches makes no flush
//     and waits for nothing (one atomic load).
//   - The invalidations of a flush go out a window at a time: at most
//     cacheWindow streams member-wide between writing one and reading its
//     ack (cache_window.go), so that a write cached by thousands of
//     connections does not queue the member's other work (the writer's
//     own liveness echoes, raft) behind the whole fan-out.
//   - While a node has a flush in flight, a read of it on the leader
//     (linearizable or a cache fill) waits for the flush before answering,
//     so that nobody sees the new value while a cache still serves the old
//     one. Reads check an FSM apply generation around the read so that a
//     batch applied but not yet observed is waited for too (gate).
//   - Leases: a client's cache is good until the send time of its newest
//     acknowledged MsgCacheRenew plus the lease (CacheLease, at most the
//     raft HeartbeatTimeout). The leader answers a renewal only after
//     confirming its leadership with a quorum in a round that started after
//     the renewal arrived; it counts the stream's lease from the arrival,
//     so its deadline is never before the client's. A flush stops waiting
//     for a stream whose lease ran out and then drops the stream (the client
//     drops its whole cache when the stream ends), as Chubby's master does
//     with a client it cannot reach.
//   - A snapshot restore replaces the state without events: the leader
//     then grants no lease and registers nothing until it dropped every
//     stream, so a cache outlives a restore by at most its lease.
//   - Failover: the new leader knows no caches. It needs none: a follower
//     that acknowledged the old leader's confirmation round refuses to vote
//     until it has heard from no leader for HeartbeatTimeout (raft's vote
//     rule), so no new leader exists, and no write it acknowledges, before
//     every lease the old leader granted ran out. Clients drop their cache
//     when their connection to the leader ends and open a new stream on the
//     new leader.

// DefaultMaxCachedPerConn is Config.MaxCachedPerConn's default.
const DefaultMaxCachedPerConn = 10000

// cacheNodeBytes is what one registration costs the leader besides its
// path, for the memory gauge.
const cacheNodeBytes = 96

// cacheTable is the leader's record of which cache streams hold which nodes
// and the invalidations in flight.
type cacheTable struct {
	lease  time.Duration
	slack  time.Duration // margin on the leader's side of every lease
	maxPer int
	verify func(context.Context) error // confirms leadership (verifyLeader)
	gen    *raftnode.ApplyGen          // the FSM's apply generation
	// restores is the FSM's snapshot install count: a restore replaces
	// the state without events, so every cache is dropped (restored).
	restores func() uint64
	restored uint64

	nholders atomic.Int64 // streams open: Applied does nothing without one
	nflushes atomic.Int64 // flushes in flight: reads and writes wait for nothing without one

	mu      sync.Mutex
	holders map[*quicfront.Conn]*cacheHolder
	closing map[*cacheHolder]struct{} // streams ended while flushes wait for them
	byPath  map[string]map[*cacheHolder]struct{}
	marks   map[string]*cacheMark   // paths with flushes in flight
	writes  map[uint64][]*cacheMark // by the index of a write: what its answer waits for
	order   []uint64                // the indexes in writes, oldest first
	nodes   int                     // registrations, all streams
	bytes   int                     // their estimated size
	wake    chan struct{}           // the lease loop looks again
	window  chan struct{}           // a place per stream with invalidations unacknowledged (cache_window.go)
	loop    sync.Once
	goFunc  func(func())
	stop    <-chan struct{}

	// skip, when above zero, makes Applied skip that many invalidations:
	// a planted bug for the tests that must catch it
	// (SkipCacheInvalidationsForTest).
	skip atomic.Int64

	invalidations atomic.Uint64 // registrations invalidated
	lapsed        atomic.Uint64 // streams dropped because their lease ran out
	fills         atomic.Uint64 // registrations made
	refused       atomic.Uint64 // fills over MaxCachedPerConn
	windowed      atomic.Uint64 // invalidation batches sent through the window
	slow          atomic.Uint64 // of which kept their place for cacheSlotHold without an ack
	latency       prometheus.Observer
}

// cacheHolder is one connection's cache stream.
type cacheHolder struct {
	c        *quicfront.Conn
	paths    map[string]struct{}
	queue    []session.Response // frames to send, in order
	seq      uint64             // the last invalidation queued
	acked    uint64             // the last invalidation acknowledged
	leaseEnd time.Time          // the leader's end of the stream's lease
	waits    []cacheWait        // flushes waiting for an ack
	notify   chan struct{}      // wakes the stream's writer; buffered 1
	acks     chan struct{}      // an ack arrived; buffered 1 (cache_window.go)
	dropped  chan struct{}      // closed when the table drops the stream
	closed   bool               // the stream ended; registrations last until the lease ends
	gone     bool               // forgotten
}

type cacheWait struct {
	f   *cacheFlush
	seq uint64
}

// cacheFlush is one write's invalidations: done closes when every stream
// that cached a node it changed acknowledged, or lost its lease.
type cacheFlush struct {
	index   uint64
	paths   []string
	waiting int
	done    chan struct{}
	start   time.Time
}

// cacheMark counts the flushes in flight on a path; done closes when the
// last one ends.
type cacheMark struct {
	n    int
	done chan struct{}
}

var cacheInvalidationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "latch_cache_invalidation_seconds",
	Help:    "Time from a write applied on the leader to every client cache holding a node it changed acknowledging the invalidation (or losing its lease).",
	Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16), // 100µs .. ~3s
}, []string{"member"})

var cacheMetricsOnce sync.Once

func newCacheTable(s *Server) *cacheTable {
	cacheMetricsOnce.Do(func() { prometheus.MustRegister(cacheInvalidationSeconds) })
	lease := s.cfg.CacheLease
	if lease == 0 {
		lease = s.cfg.HeartbeatTimeout
	}
	maxPer := s.cfg.MaxCachedPerConn
	if maxPer == 0 {
		maxPer = DefaultMaxCachedPerConn
	}
	return &cacheTable{
		lease:    lease,
		slack:    lease/50 + time.Millisecond,
		maxPer:   maxPer,
		verify:   s.verifyLeader,
		gen:      s.fsm.Gen(),
		restores: s.fsm.Restores,
		restored: s.fsm.Restores(),
		holders:  map[*quicfront.Conn]*cacheHolder{},
		closing:  map[*cacheHolder]struct{}{},
		byPath:   map[string]map[*cacheHolder]struct{}{},
		marks:    map[string]*cacheMark{},
		writes:   map[uint64][]*cacheMark{},
		wake:     make(chan struct{}, 1),
		window:   make(chan struct{}, cacheWindow),
		goFunc:   s.goFunc,
		stop:     s.stop,
		latency:  cacheInvalidationSeconds.WithLabelValues(s.cfg.ID),
	}
}

// registerCache installs the cache stream and the cache observer; the
// caller (register) runs before Start.
func (f *front) registerCache() {
	f.cache = newCacheTable(f.s)
	f.handleStream(session.MsgCache, f.serveCache)
	f.observers = append(f.observers, f.cache)
}

// SkipCacheInvalidationsForTest makes the leader skip the next n cache
// invalidations: a planted bug, so that a test shows its checker catches a
// stale cached read. Never call it outside tests.
func (s *Server) SkipCacheInvalidationsForTest(n int) {
	if s.front != nil {
		s.front.cache.skip.Store(int64(n))
	}
}

// serveCache runs a connection's cache stream: the acknowledgement (with
// the lease), then invalidations and lease grants in order, while a reader
// takes the client's acks and renewals.
func (f *front) serveCache(ctx context.Context, c *quicfront.Conn, str *quic.Stream, _ *session.Request) error {
	if err := f.keep.Serving(); err != nil {
		return err // only the ready leader knows what is written next
	}
	t := f.cache
	h, err := t.open(c)
	if err != nil {
		return err
	}
	defer t.close(h)
	str.SetReadDeadline(time.Time{})
	if err := session.WriteResponse(str, &session.Response{TTLMillis: t.lease.Milliseconds()}); err != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		str.CancelRead(session.StreamDone) // ends the reader
		wg.Wait()
	}()
	wg.Go(func() { t.readAcks(ctx, cancel, &wg, h, str, c.MaxFrameSize()) })
	for {
		t.mu.Lock()
		batch := h.queue
		h.queue = nil
		t.mu.Unlock()
		// Invalidations go out a window of streams at a time
		// (cache_window.go); lease grants alone need no place.
		seq := lastInvalidation(batch)
		deadline := watchWriteTimeout
		if seq > 0 {
			if !t.enter(ctx, h) {
				break
			}
			// A client that cannot take an invalidation within its
			// lease loses its cache with the stream; meanwhile the
			// stream holds a place in the window.
			deadline = t.lease
		}
		for i := range batch {
			str.SetWriteDeadline(time.Now().Add(deadline))
			if err := session.WriteResponse(str, &batch[i]); err != nil {
				if seq > 0 {
					t.exit()
				}
				return nil // the client drops its cache with the stream
			}
		}
		if seq > 0 {
			// What is written next (a grant, the stream's error) has
			// the usual time.
			str.SetWriteDeadline(time.Now().Add(watchWriteTimeout))
			t.leave(ctx, h, seq)
		}
		select {
		case <-h.notify:
			continue
		case <-h.dropped:
		case <-ctx.Done():
		}
		break
	}
	select {
	case <-h.dropped:
		return fmt.Errorf("%w: the cache lease ran out with invalidations unacknowledged", session.ErrTimeout)
	default:
		return nil
	}
}

// readAcks reads the client's frames on the cache stream until it ends;
// then it cancels the stream. Renewals are confirmed on goroutines of wg.
func (t *cacheTable) readAcks(ctx context.Context, cancel context.CancelFunc, wg *sync.WaitGroup, h *cacheHolder, str *quic.Stream, maxFrame int) {
	defer cancel()
	for {
		req, err := session.ReadNextRequest(str, maxFrame)
		if err != nil {
			return
		}
		switch req.Type {
		case session.MsgCacheAck:
			t.ack(h, req.FromRev)
		case session.MsgCacheRenew:
			// Counted from arrival before the confirmation: a flush made
			// meanwhile waits for this stream (its client may count its
			// lease from a send time before the flush).
			t.extend(h, time.Now().Add(t.lease))
			wg.Go(func() {
				vctx, vcancel := context.WithTimeout(ctx, t.lease)
				defer vcancel()
				if err := t.verify(vctx); err != nil {
					cancel() // not the leader: the stream ends, the client drops its cache
					return
				}
				t.grant(h)
			})
		default:
			return // nothing else belongs on the stream
		}
	}
}

// open registers c's cache stream.
func (t *cacheTable) open(c *quicfront.Conn) (*cacheHolder, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.holders[c]; ok {
		return nil, fmt.Errorf("%w: this connection's cache stream is already open", session.ErrBusy)
	}
	h := &cacheHolder{c: c, paths: map[string]struct{}{}, notify: make(chan struct{}, 1), acks: make(chan struct{}, 1), dropped: make(chan struct{})}
	t.holders[c] = h
	t.nholders.Add(1)
	t.loop.Do(func() { t.goFunc(t.run) })
	return h, nil
}

// close ends h's stream. Its registrations stay until its lease ends
// (expire): its client may not know yet that the stream is gone and serve
// its copies until then, so a write of a node it cached waits that long.
func (t *cacheTable) close(h *cacheHolder) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h.gone || h.closed {
		return
	}
	h.closed = true
	h.queue = nil
	delete(t.holders, h.c)
	t.closing[h] = struct{}{}
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// drop forgets h and everything it cached, and releases the flushes that
// wait for it: its lease ran out (with invalidations unacknowledged, for
// an open stream, which then ends).
func (t *cacheTable) drop(h *cacheHolder) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h.gone {
		return
	}
	h.gone = true
	if !h.closed {
		t.lapsed.Add(1)
		close(h.dropped)
	}
	delete(t.holders, h.c)
	delete(t.closing, h)
	t.nholders.Add(-1)
	for p := range h.paths {
		t.unregisterLocked(h, p)
	}
	for _, w := range h.waits {
		t.releaseLocked(w.f)
	}
	h.waits = nil
}

func (t *cacheTable) unregisterLocked(h *cacheHolder, p string) {
	delete(h.paths, p)
	if hs := t.byPath[p]; hs != nil {
		delete(hs, h)
		if len(hs) == 0 {
			delete(t.byPath, p)
		}
	}
	t.nodes--
	t.bytes -= len(p) + cacheNodeBytes
}

// register records that c caches p, before p is read: a write applied
// after it invalidates c's copy. It reports false when c has no cache
// stream or its cap is reached.
func (t *cacheTable) register(c *quicfront.Conn, p string) bool {
	if t.nholders.Load() == 0 || t.checkRestore() {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.holders[c]
	if h == nil || h.gone {
		return false
	}
	if _, ok := h.paths[p]; ok {
		return true
	}
	if len(h.paths) >= t.maxPer {
		t.refused.Add(1)
		return false
	}
	h.paths[p] = struct{}{}
	hs := t.byPath[p]
	if hs == nil {
		hs = map[*cacheHolder]struct{}{}
		t.byPath[p] = hs
	}
	hs[h] = struct{}{}
	t.nodes++
	t.bytes += len(p) + cacheNodeBytes
	t.fills.Add(1)
	return true
}

// registered reports whether c still caches p (no invalidation came
// between register and the answer).
func (t *cacheTable) registered(c *quicfront.Conn, p string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.holders[c]
	if h == nil {
		return false
	}
	_, ok := h.paths[p]
	return ok
}

// cacheStats is what the metrics report of the table.
type cacheStats struct {
	holders, nodes, bytes, flushes                        int
	invalidations, lapsed, fills, refused, windowed, slow uint64
}

func (t *cacheTable) stats() cacheStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return cacheStats{
		holders: len(t.holders), nodes: t.nodes, bytes: t.bytes, flushes: int(t.nflushes.Load()),
		invalidations: t.invalidations.Load(), lapsed: t.lapsed.Load(), fills: t.fills.Load(), refused: t.refused.Load(),
		windowed: t.windowed.Load(), slow: t.slow.Load(),
	}
}
