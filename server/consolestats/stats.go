// Package consolestats samples one member's counters for the web
// console's charts: once a second (Interval) into a ring of the last few
// minutes (History), which the member's HTTP API streams as Server-Sent
// Events (package httpapi, console_stats.go). Decisions:
//
//   - The source is the member's Prometheus series: what the charts show
//     is what /metrics says, read without a scrape. Writes are commands
//     the member proposed as leader and saw committed; reads are
//     namespace read requests it answered; latencies are the p50 and p99
//     of the unary requests it answered during the second, from the
//     request histogram's buckets.
//   - Watch events are the node events the member applied (what watches
//     can see; every member applies the same) and leader changes the new
//     raft terms it saw.
//   - Sessions and locks are read from the store, as a scrape reads them.
//     That costs a scan of the sessions, so it is done every second only
//     while a stream is open (Open), and every idleEvery-th second
//     otherwise: the ring keeps the minutes before a page opened at a
//     coarser grain.
//   - The sampler reads the member through the functions of a Source, not
//     the server, so it is tested without one.
package consolestats

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

const (
	// Interval is how often a member samples its counters.
	Interval = time.Second
	// History is how many samples a member keeps (5 minutes).
	History = 300
	// idleEvery: with no stream open, sessions and locks are read
	// every idleEvery samples.
	idleEvery = 10
)

// readTypes are the requests a chart counts as reads.
var readTypes = map[string]bool{
	session.MsgGet.String(): true, session.MsgStat.String(): true, session.MsgExists.String(): true,
	session.MsgChildren.String(): true, session.MsgSync.String(): true, session.MsgLockQueue.String(): true,
	session.MsgLockHistory.String(): true, session.MsgCheckSequencer.String(): true,
}

// Sample is one second of one member, as the console receives it.
type Sample struct {
	Seq    uint64 `json:"seq"`
	Member string `json:"member"`
	Time   int64  `json:"t"` // unix milliseconds, the member's clock
	Leader bool   `json:"leader"`
	Term   uint64 `json:"term"`
	// Rates over the second before Time.
	Writes      float64 `json:"writes"`
	Reads       float64 `json:"reads"`
	Requests    float64 `json:"requests"`
	WatchEvents float64 `json:"watch_events"`
	// LeaderChanges is how many new terms began since the last sample.
	LeaderChanges uint64 `json:"leader_changes"`
	// P50 and P99 of the unary requests answered in the second, in
	// milliseconds; absent when there were none.
	P50 *float64 `json:"p50_ms,omitempty"`
	P99 *float64 `json:"p99_ms,omitempty"`
	// Absent when not read this second (see idleEvery).
	Sessions     *int `json:"sessions,omitempty"`
	LocksHeld    *int `json:"locks_held,omitempty"`
	LocksWaiting *int `json:"locks_waiting,omitempty"`
}

// counters are the cumulative values a sample is the difference of.
type counters struct {
	at       time.Time
	writes   float64
	reads    float64
	requests float64
	events   uint64
	term     uint64
	buckets  []float64 // cumulative counts per request histogram bound
	bounds   []float64
	count    float64
}

// Source is what a member's sampler reads, wired through functions
// (as the watch hub is) rather than the server, so that it can be tested
// without one.
type Source struct {
	ID       string
	Now      func() time.Time
	Term     func() uint64  // raft's current term
	Leader   func() bool    // the member is the ready leader
	Writes   func() float64 // commands proposed as leader, committed (ok or rejected)
	Sessions func() (int, error)
	Locks    func() (held, waiting int, err error) // lock requests granted, not yet granted
	// Requests and Latency are the request series: a counter labelled
	// member, type and result, and a histogram labelled member and type.
	// Only the series of member ID count.
	Requests, Latency prometheus.Collector
}

// Sampler is one member's sampler and ring.
type Sampler struct {
	src    Source
	events atomic.Uint64 // node events applied
	// streams open on this member; while any is, gauges are read every
	// second.
	streams atomic.Int32

	prev *counters // the last sample's counters (run's goroutine only)

	mu      sync.Mutex
	ring    []Sample // circular, History long once full
	next    int
	seq     uint64
	changed chan struct{} // closed and replaced at every sample
}

func New(src Source) *Sampler {
	return &Sampler{src: src, changed: make(chan struct{})}
}

// Applied counts the node events of a batch. It runs on the FSM
// goroutine and only adds.
func (st *Sampler) Applied(results []*namespace.Result) {
	var n uint64
	for _, r := range results {
		for i := range r.Events {
			if r.Events[i].Type.IsNodeEvent() {
				n++
			}
		}
	}
	if n > 0 {
		st.events.Add(n)
	}
}

// run samples every Interval until stop closes.
func (st *Sampler) Run(stop <-chan struct{}) {
	tick := time.NewTicker(Interval)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		st.sample(st.streams.Load() > 0 || n%idleEvery == 0)
	}
}

// sample takes one sample; gauges: read sessions and locks too.
func (st *Sampler) sample(gauges bool) {
	src := st.src
	id := src.ID
	cur := &counters{at: src.Now(), events: st.events.Load(), term: src.Term(), writes: src.Writes()}
	collectFor(src.Requests, id, func(labels map[string]string, m *dto.Metric) {
		v := m.GetCounter().GetValue()
		cur.requests += v
		if readTypes[labels["type"]] && labels["result"] == "ok" {
			cur.reads += v
		}
	})
	collectFor(src.Latency, id, func(_ map[string]string, m *dto.Metric) {
		h := m.GetHistogram()
		if cur.bounds == nil {
			for _, b := range h.GetBucket() {
				cur.bounds = append(cur.bounds, b.GetUpperBound())
			}
			cur.buckets = make([]float64, len(cur.bounds))
		}
		for i, b := range h.GetBucket() {
			if i < len(cur.buckets) {
				cur.buckets[i] += float64(b.GetCumulativeCount())
			}
		}
		cur.count += float64(h.GetSampleCount())
	})

	smp := Sample{Member: id, Time: cur.at.UnixMilli(), Leader: src.Leader(), Term: cur.term}
	if prev := st.prev; prev != nil {
		secs := cur.at.Sub(prev.at).Seconds()
		if secs <= 0 {
			secs = Interval.Seconds()
		}
		rate := func(now, before float64) float64 { return max(now-before, 0) / secs }
		smp.Writes = rate(cur.writes, prev.writes)
		smp.Reads = rate(cur.reads, prev.reads)
		smp.Requests = rate(cur.requests, prev.requests)
		smp.WatchEvents = rate(float64(cur.events), float64(prev.events))
		if cur.term > prev.term {
			smp.LeaderChanges = cur.term - prev.term
		}
		before := prev.buckets
		if before == nil {
			before = make([]float64, len(cur.buckets)) // no request had been timed
		}
		if n := cur.count - prev.count; n > 0 && len(cur.buckets) == len(before) {
			delta := make([]float64, len(cur.buckets))
			for i := range delta {
				delta[i] = cur.buckets[i] - before[i]
			}
			p50 := 1000 * bucketQuantile(0.5, cur.bounds, delta, n)
			p99 := 1000 * bucketQuantile(0.99, cur.bounds, delta, n)
			smp.P50, smp.P99 = &p50, &p99
		}
	}
	if gauges {
		if n, err := src.Sessions(); err == nil {
			smp.Sessions = &n
		}
		if held, waiting, err := src.Locks(); err == nil {
			smp.LocksHeld, smp.LocksWaiting = &held, &waiting
		}
	}

	st.prev = cur
	st.push(smp)
}

// Open counts a stream of the samples open until the returned func is
// called: while any is, gauges are read every second.
func (st *Sampler) Open() (closed func()) {
	st.streams.Add(1)
	return func() { st.streams.Add(-1) }
}

// push numbers smp, keeps it in the ring and wakes the streams.
func (st *Sampler) push(smp Sample) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.seq++
	smp.Seq = st.seq
	if len(st.ring) < History {
		st.ring = append(st.ring, smp)
	} else {
		st.ring[st.next] = smp
	}
	st.next = (st.next + 1) % History
	close(st.changed)
	st.changed = make(chan struct{})
}

// since returns the samples after seq, oldest first, and a channel
// closed at the next sample.
func (st *Sampler) Since(seq uint64) ([]Sample, <-chan struct{}) {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []Sample
	start := 0
	if len(st.ring) == History {
		start = st.next
	}
	for i := range st.ring {
		if smp := st.ring[(start+i)%len(st.ring)]; smp.Seq > seq {
			out = append(out, smp)
		}
	}
	return out, st.changed
}

// bucketQuantile estimates the q-quantile of n observations from
// per-bucket counts (cumulative, bounds ascending), interpolating
// linearly inside the bucket as Prometheus' histogram_quantile does. Past
// the last bound it answers the last bound.
func bucketQuantile(q float64, bounds, cumulative []float64, n float64) float64 {
	if len(bounds) == 0 || n <= 0 {
		return 0
	}
	rank := q * n
	i := sort.Search(len(cumulative), func(i int) bool { return cumulative[i] >= rank })
	if i == len(cumulative) {
		return bounds[len(bounds)-1]
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = bounds[i-1], cumulative[i-1]
	}
	inBucket := cumulative[i] - below
	if inBucket <= 0 {
		return bounds[i]
	}
	return lower + (bounds[i]-lower)*(rank-below)/inBucket
}

// MetricValue reads a counter or gauge.
func MetricValue(m prometheus.Metric) float64 {
	var d dto.Metric
	if m == nil || m.Write(&d) != nil {
		return 0
	}
	if c := d.GetCounter(); c != nil {
		return c.GetValue()
	}
	return d.GetGauge().GetValue()
}

// collectFor calls f with each of c's metrics labelled member=id.
func collectFor(c prometheus.Collector, id string, f func(labels map[string]string, m *dto.Metric)) {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) != nil {
			continue
		}
		labels := make(map[string]string, len(d.GetLabel()))
		for _, l := range d.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["member"] == id {
			f(labels, &d)
		}
	}
}
