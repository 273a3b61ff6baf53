package server

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/latch-io/latch/session"
)

// staleCatchUp bounds how long a member waits for its applied index to
// reach a Stale read's MinRev before it answers ErrBehind: a follower
// usually trails the leader by one heartbeat or commit notice (a few
// milliseconds), and a client whose read it refuses asks another member.
const staleCatchUp = 100 * time.Millisecond

// readCounts counts the reads a member answered, by how: reads served per
// member show whether stale reads and the client cache take load off the
// leader.
type readCounts struct {
	linearizable atomic.Uint64
	stale        atomic.Uint64
	behind       atomic.Uint64 // Stale reads refused with ErrBehind
	fills        atomic.Uint64 // linearizable reads that asked to cache
}

// waitMinRev makes a Stale read (or a watch) wait until this member
// applied min, at most staleCatchUp, and fails with session.ErrBehind when
// it does not: a client never reads older state than it already saw.
func (f *front) waitMinRev(ctx context.Context, min uint64) error {
	if min == 0 || f.s.fsmApplied() >= min {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, staleCatchUp)
	defer cancel()
	if err := f.s.fsm.WaitApplied(wctx, f.s.stop, min); err != nil {
		if ctx.Err() != nil || err == ErrClosed {
			return err
		}
		f.reads.behind.Add(1)
		return fmt.Errorf("%w: %s applied %d, the client saw %d", session.ErrBehind, f.s.cfg.ID, f.s.fsmApplied(), min)
	}
	return nil
}

var (
	descReads = prometheus.NewDesc("latch_reads_total",
		"Reads this member answered, by kind: linearizable (leader), stale (any member, from its own state), cache_fill (linearizable reads that registered the node in a client cache), behind (Stale reads refused with ErrBehind: the member had not applied what the client saw).",
		[]string{"member", "kind"}, nil)
	descCacheStreams      = prometheus.NewDesc("latch_cache_streams", "Client cache streams open on this member (the leader).", []string{"member"}, nil)
	descCacheNodes        = prometheus.NewDesc("latch_cache_nodes", "Nodes registered in client caches, all connections (cap per connection: --max-cached-per-conn).", []string{"member"}, nil)
	descCacheBytes        = prometheus.NewDesc("latch_cache_table_bytes", "Estimated memory of the leader's client-cache table.", []string{"member"}, nil)
	descCacheFlushes      = prometheus.NewDesc("latch_cache_flushes", "Writes waiting for client caches to acknowledge invalidations.", []string{"member"}, nil)
	descCacheInvalidated  = prometheus.NewDesc("latch_cache_invalidations_total", "Cached copies invalidated (one per client cache and node).", []string{"member"}, nil)
	descCacheLapsed       = prometheus.NewDesc("latch_cache_lapsed_total", "Client cache streams dropped because their lease ran out with invalidations unacknowledged.", []string{"member"}, nil)
	descCacheRegistered   = prometheus.NewDesc("latch_cache_registrations_total", "Nodes registered in client caches.", []string{"member"}, nil)
	descCacheRefusedNodes = prometheus.NewDesc("latch_cache_refused_total", "Cache fills answered without caching because the connection's cap was reached.", []string{"member"}, nil)
	descCacheWindowed     = prometheus.NewDesc("latch_cache_windowed_total", "Invalidation batches sent to a client cache through the fan-out window (cache_window.go).", []string{"member"}, nil)
	descCacheSlowAcks     = prometheus.NewDesc("latch_cache_slow_acks_total", "Invalidation batches whose client did not acknowledge within the window's hold (5ms): the stream gave its place up to the next.", []string{"member"}, nil)

	readDescs = []*prometheus.Desc{descReads, descCacheStreams, descCacheNodes, descCacheBytes, descCacheFlushes,
		descCacheInvalidated, descCacheLapsed, descCacheRegistered, descCacheRefusedNodes, descCacheWindowed, descCacheSlowAcks}
)

// collectReads reports the reads served and the client-cache table.
func (f *front) collectReads(ch chan<- prometheus.Metric, id string) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{id}, labels...)...)
	}
	gauge := func(d *prometheus.Desc, v int) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), id)
	}
	counter(descReads, f.reads.linearizable.Load(), "linearizable")
	counter(descReads, f.reads.stale.Load(), "stale")
	counter(descReads, f.reads.fills.Load(), "cache_fill")
	counter(descReads, f.reads.behind.Load(), "behind")
	st := f.cache.stats()
	gauge(descCacheStreams, st.holders)
	gauge(descCacheNodes, st.nodes)
	gauge(descCacheBytes, st.bytes)
	gauge(descCacheFlushes, st.flushes)
	counter(descCacheInvalidated, st.invalidations)
	counter(descCacheLapsed, st.lapsed)
	counter(descCacheRegistered, st.fills)
	counter(descCacheRefusedNodes, st.refused)
	counter(descCacheWindowed, st.windowed)
	counter(descCacheSlowAcks, st.slow)
}
