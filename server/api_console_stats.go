package server

// The console's charts over time: every member samples its own counters
// once a second (consoleStats) into a ring of the last few minutes, and
// streams the samples as Server-Sent Events on GET /api/v1/stats/events.
// A page gets the ring first, so it draws the last minutes at once, then
// one sample a second. ?member=ID asks another member's stream through
// this one (the console runs under a same-origin policy and shows every
// member, whichever one served it). Decisions:
//
//   - The source is the member's Prometheus series (metrics.go,
//     metrics_ops.go): what the charts show is what /metrics says, read
//     without a scrape. Writes are commands this member proposed as
//     leader and saw committed; reads are namespace read requests it
//     answered; latencies are the p50 and p99 of the unary requests it
//     answered during the second, from the request histogram's buckets.
//   - Watch events are the node events this member applied (what watches
//     can see; every member applies the same) and leader changes the new
//     raft terms it saw.
//   - Sessions and locks are read from the store, as a scrape reads them.
//     That costs a scan of the sessions, so it is done every second only
//     while a console stream is open, and every statsIdleEvery-th second
//     otherwise: the ring keeps the minutes before a page opened at a
//     coarser grain.

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/namespace/store"
	"github.com/latch-io/latch/session"
)

const (
	// statsInterval is how often a member samples its counters.
	statsInterval = time.Second
	// statsHistory is how many samples a member keeps (5 minutes).
	statsHistory = 300
	// statsIdleEvery: with no stream open, sessions and locks are read
	// every statsIdleEvery samples.
	statsIdleEvery = 10
)

// statsReadTypes are the requests a chart counts as reads.
var statsReadTypes = map[string]bool{
	session.MsgGet.String(): true, session.MsgStat.String(): true, session.MsgExists.String(): true,
	session.MsgChildren.String(): true, session.MsgSync.String(): true, session.MsgLockQueue.String(): true,
	session.MsgLockHistory.String(): true, session.MsgCheckSequencer.String(): true,
}

// statsSample is one second of one member, as the console receives it.
type statsSample struct {
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
	// Absent when not read this second (see statsIdleEvery).
	Sessions     *int `json:"sessions,omitempty"`
	LocksHeld    *int `json:"locks_held,omitempty"`
	LocksWaiting *int `json:"locks_waiting,omitempty"`
}

// statsCounters are the cumulative values a sample is the difference of.
type statsCounters struct {
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

// statsSource is what a member's sampler reads, wired through functions
// (as the watch hub is) rather than the server, so that it can be tested
// without one. Requests and their latencies are read from the request
// series labelled with id.
type statsSource struct {
	id       string
	now      func() time.Time
	term     func() uint64  // raft's current term
	leader   func() bool    // the member is the ready leader
	writes   func() float64 // commands proposed as leader, committed (ok or rejected)
	sessions func() (int, error)
	locks    func() (store.LockCounts, error)
}

// statsSource wires a member's sampler to it.
func (s *Server) statsSource() statsSource {
	return statsSource{
		id:  s.cfg.ID,
		now: time.Now,
		term: func() uint64 {
			if r := s.raft; r != nil {
				return r.CurrentTerm()
			}
			return 0
		},
		leader: s.IsLeader,
		writes: func() float64 {
			if m := s.metrics; m != nil {
				return metricValue(m.ok) + metricValue(m.rejected)
			}
			return 0
		},
		sessions: func() (int, error) {
			ss, err := s.store.Sessions()
			return len(ss), err
		},
		locks: s.store.CountLocks,
	}
}

// consoleStats is one member's sampler and ring.
type consoleStats struct {
	src    statsSource
	events atomic.Uint64 // node events applied
	// streams open on this member; while any is, gauges are read every
	// second.
	streams atomic.Int32

	prev *statsCounters // the last sample's counters (run's goroutine only)

	mu      sync.Mutex
	ring    []statsSample // circular, statsHistory long once full
	next    int
	seq     uint64
	changed chan struct{} // closed and replaced at every sample
}

func newConsoleStats(src statsSource) *consoleStats {
	return &consoleStats{src: src, changed: make(chan struct{})}
}

// Applied counts the node events of a batch. It runs on the FSM
// goroutine and only adds.
func (st *consoleStats) Applied(results []*namespace.Result) {
	var n uint64
	for _, r := range results {
		for i := range r.Events {
			if isNodeEvent(r.Events[i].Type) {
				n++
			}
		}
	}
	if n > 0 {
		st.events.Add(n)
	}
}

// run samples every statsInterval until stop closes.
func (st *consoleStats) run(stop <-chan struct{}) {
	tick := time.NewTicker(statsInterval)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		st.sample(st.streams.Load() > 0 || n%statsIdleEvery == 0)
	}
}

// sample takes one sample; gauges: read sessions and locks too.
func (st *consoleStats) sample(gauges bool) {
	src := st.src
	id := src.id
	cur := &statsCounters{at: src.now(), events: st.events.Load(), term: src.term(), writes: src.writes()}
	collectFor(requestsTotal, id, func(labels map[string]string, m *dto.Metric) {
		v := m.GetCounter().GetValue()
		cur.requests += v
		if statsReadTypes[labels["type"]] && labels["result"] == "ok" {
			cur.reads += v
		}
	})
	collectFor(requestSeconds, id, func(_ map[string]string, m *dto.Metric) {
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

	smp := statsSample{Member: id, Time: cur.at.UnixMilli(), Leader: src.leader(), Term: cur.term}
	if prev := st.prev; prev != nil {
		secs := cur.at.Sub(prev.at).Seconds()
		if secs <= 0 {
			secs = statsInterval.Seconds()
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
		if n, err := src.sessions(); err == nil {
			smp.Sessions = &n
		}
		if c, err := src.locks(); err == nil {
			held, waiting := c.Held, c.Waiting
			smp.LocksHeld, smp.LocksWaiting = &held, &waiting
		}
	}

	st.prev = cur
	st.push(smp)
}

// push numbers smp, keeps it in the ring and wakes the streams.
func (st *consoleStats) push(smp statsSample) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.seq++
	smp.Seq = st.seq
	if len(st.ring) < statsHistory {
		st.ring = append(st.ring, smp)
	} else {
		st.ring[st.next] = smp
	}
	st.next = (st.next + 1) % statsHistory
	close(st.changed)
	st.changed = make(chan struct{})
}

// since returns the samples after seq, oldest first, and a channel
// closed at the next sample.
func (st *consoleStats) since(seq uint64) ([]statsSample, <-chan struct{}) {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []statsSample
	start := 0
	if len(st.ring) == statsHistory {
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

// metricValue reads a counter or gauge.
func metricValue(m prometheus.Metric) float64 {
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

// statsHistoryMessage is the first message of a stats stream.
type statsHistoryMessage struct {
	Member     string        `json:"member"`
	IntervalMS int64         `json:"interval_ms"`
	Samples    []statsSample `json:"samples"`
}

// statsEvents answers GET /api/v1/stats/events[?member=ID]: a "history"
// event with the member's ring, then a "sample" event every second. For
// another member it relays that member's stream.
func (a *apiFront) statsEvents(w http.ResponseWriter, r *http.Request, c caller) {
	id := r.URL.Query().Get("member")
	if id != "" && id != a.s.cfg.ID {
		a.relayStats(w, r, c, id)
		return
	}
	release, err := a.watchSlot(c.identity)
	if err != nil {
		apiError(w, err)
		return
	}
	defer release()
	st := a.stats
	st.streams.Add(1)
	defer st.streams.Add(-1)
	samples, changed := st.since(0)
	out, err := startSSE(w)
	if err != nil {
		return
	}
	if samples == nil {
		samples = []statsSample{}
	}
	if out.event("", "history", statsHistoryMessage{Member: a.s.cfg.ID, IntervalMS: statsInterval.Milliseconds(), Samples: samples}, true) != nil {
		return
	}
	var last uint64
	if len(samples) > 0 {
		last = samples[len(samples)-1].Seq
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-changed:
		}
		samples, changed = st.since(last)
		for i, smp := range samples {
			if out.event("", "sample", smp, i == len(samples)-1) != nil {
				return
			}
			last = smp.Seq
		}
	}
}

// relayStats serves member id's stats stream through this member.
func (a *apiFront) relayStats(w http.ResponseWriter, r *http.Request, c caller, id string) {
	if c.forwarded {
		// Its first member asked the wrong one: never relay twice.
		apiError(w, fmt.Errorf("%w: %s is not member %s", namespace.ErrNoMember, a.s.cfg.ID, id))
		return
	}
	ms, err := a.s.Members()
	if err != nil {
		apiError(w, err)
		return
	}
	i := slices.IndexFunc(ms, func(m MemberStatus) bool { return m.ID == id })
	if i < 0 {
		apiError(w, fmt.Errorf("%w: %s", namespace.ErrNoMember, id))
		return
	}
	addr := ms[i].APIAddr
	if addr == "" {
		// It has not recorded its addresses in the log yet.
		apiError(w, fmt.Errorf("%w: member %s's api address is not known yet", session.ErrTimeout, id))
		return
	}
	release, err := a.watchSlot(c.identity)
	if err != nil {
		apiError(w, err)
		return
	}
	defer release()
	done, err := a.forwardTo(r.Context(), w, r, c, addr, nil)
	if !done {
		msg := "it did not answer"
		if err != nil {
			msg = err.Error()
		}
		apiError(w, fmt.Errorf("%w: member %s's stats: %s", session.ErrTimeout, id, msg))
	}
}
