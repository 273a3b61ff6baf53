package server

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// Operator metrics: sessions, locks, watches, connections, requests by
// type, expiries and apply errors. Counters move on every member as it
// applies the log (so any member can be scraped); the session, lock, watch
// and connection gauges are read at scrape time. Names follow
// latch_<area>_<thing>; the README lists every latch_* series.
var (
	opsRegisterOnce sync.Once

	requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "latch_requests_total",
		Help: "Client requests (QUIC and HTTP API) answered by this member, by message type and result (ok or error).",
	}, []string{"member", "type", "result"})
	requestSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "latch_request_duration_seconds",
		Help:    "Time to answer a unary client request, by message type (lock waits and watches are streams and not timed).",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 18), // 50µs .. ~6.5s
	}, []string{"member", "type"})
	sessionsEventsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "latch_sessions_total",
		Help: "Session lifecycle events applied: opened, closed (by the client) and expired (TTL ran out).",
	}, []string{"member", "event"})
	lockGrantsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "latch_lock_grants_total",
		Help: "Lock requests granted (rate() is grants per second).",
	}, []string{"member"})
	applyErrorsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "latch_apply_errors_total",
		Help: "Log entries the state machine failed to apply: decode (entry unreadable, applied as a no-op) or storage (badger failed).",
	}, []string{"member", "kind"})

	descSessionsOpen = prometheus.NewDesc("latch_sessions_open", "Sessions in the namespace.", []string{"member"}, nil)
	descLocksHeld    = prometheus.NewDesc("latch_locks_held", "Lock requests granted to live sessions.", []string{"member"}, nil)
	descLocksWaiting = prometheus.NewDesc("latch_locks_waiting", "Lock requests waiting for a grant.", []string{"member"}, nil)
	descLocksDelayed = prometheus.NewDesc("latch_locks_delayed", "Locks whose holder's session expired, kept ungranted until their lock-delay ends.", []string{"member"}, nil)
	descWatches      = prometheus.NewDesc("latch_watches_active", "Watches served by this member.", []string{"member"}, nil)
	descConnections  = prometheus.NewDesc("latch_connections_open", "Client QUIC connections to this member.", []string{"member"}, nil)
	descDecodeErrors = prometheus.NewDesc("latch_apply_decode_errors_total", "Log entries that did not decode (applied as no-ops); also counted in latch_apply_errors_total{kind=\"decode\"}.", []string{"member"}, nil)
)

func registerOpsMetrics() {
	opsRegisterOnce.Do(func() {
		prometheus.MustRegister(requestsTotal, requestSeconds, sessionsEventsTotal, lockGrantsTotal, applyErrorsTotal, opsCollector{})
	})
}

// opsMetrics are one member's handles, and its apply observer.
type opsMetrics struct {
	id      string
	grants  prometheus.Counter
	opened  prometheus.Counter
	closed  prometheus.Counter
	expired prometheus.Counter
	storage prometheus.Counter
	decode  prometheus.Counter
	// decodeSeen is how many decode errors the FSM had reported when the
	// counter was last brought up to date.
	decodeSeen atomic.Uint64
	// requests holds each message type's series of a unary request
	// answered without error, looked up on the first: a label lookup
	// hashes the labels and takes the vector's lock, on every request of
	// a busy member.
	requests [256]atomic.Pointer[requestSeries]
}

// requestSeries are one message type's children of requestsTotal
// (result ok) and requestSeconds for this member.
type requestSeries struct {
	ok      prometheus.Counter
	seconds prometheus.Observer
}

func newOpsMetrics(s *Server) *opsMetrics {
	registerOpsMetrics()
	id := s.cfg.ID
	m := &opsMetrics{
		id:      id,
		grants:  lockGrantsTotal.WithLabelValues(id),
		opened:  sessionsEventsTotal.WithLabelValues(id, "opened"),
		closed:  sessionsEventsTotal.WithLabelValues(id, "closed"),
		expired: sessionsEventsTotal.WithLabelValues(id, "expired"),
		storage: applyErrorsTotal.WithLabelValues(id, "storage"),
		decode:  applyErrorsTotal.WithLabelValues(id, "decode"),
	}
	if s.front != nil {
		s.front.observe(m)
	}
	return m
}

// Applied counts what a batch did.
func (m *opsMetrics) Applied(results []*namespace.Result) {
	for _, r := range results {
		m.count(r)
	}
}

func (m *opsMetrics) count(r *namespace.Result) {
	if r == nil {
		return
	}
	if r.Err != nil && errors.Is(r.Err, namespace.ErrStorage) {
		m.storage.Inc()
	}
	m.grants.Add(float64(len(r.Grants)))
	for _, ev := range r.Events {
		switch ev.Type {
		case namespace.EventSessionOpened:
			m.opened.Inc()
		case namespace.EventSessionClosed:
			m.closed.Inc()
		case namespace.EventSessionExpired:
			m.expired.Inc()
		}
	}
	for i := range r.Results {
		sub := r.Results[i]
		if len(sub.Events) > 0 || len(sub.Grants) > 0 {
			// A multi's or a batch expiry's parts: their events are
			// usually also on the parent; count only what the parent
			// lacks.
			if len(r.Events) == 0 && len(r.Grants) == 0 {
				m.count(&sub)
			}
		}
	}
}

// request counts one client request and, for a unary one, its duration.
func (m *opsMetrics) request(t session.MsgType, start time.Time, err error, timed bool) {
	if err != nil || !timed {
		result := "ok"
		if err != nil {
			result = "error"
		}
		name := t.String()
		requestsTotal.WithLabelValues(m.id, name, result).Inc()
		if timed {
			requestSeconds.WithLabelValues(m.id, name).Observe(time.Since(start).Seconds())
		}
		return
	}
	rs := m.requests[t].Load()
	if rs == nil {
		// Two first requests may both get here; the children they look
		// up are the same.
		name := t.String()
		rs = &requestSeries{ok: requestsTotal.WithLabelValues(m.id, name, "ok"), seconds: requestSeconds.WithLabelValues(m.id, name)}
		m.requests[t].Store(rs)
	}
	rs.ok.Inc()
	rs.seconds.Observe(time.Since(start).Seconds())
}

// opsCollector reads the gauges of every live member at scrape time.
type opsCollector struct{}

func (opsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSessionsOpen, descLocksHeld, descLocksWaiting, descLocksDelayed, descWatches, descConnections, descDecodeErrors} {
		ch <- d
	}
}

func (opsCollector) Collect(ch chan<- prometheus.Metric) {
	members.mu.Lock()
	defer members.mu.Unlock()
	seen := map[string]bool{}
	for s := range members.servers {
		id := s.cfg.ID
		if seen[id] || s.raft == nil || s.front == nil {
			continue // see memberCollector.Collect
		}
		seen[id] = true
		gauge := func(d *prometheus.Desc, v int) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), id)
		}
		if sessions, err := s.store.Sessions(); err == nil {
			gauge(descSessionsOpen, len(sessions))
		}
		if c, err := s.store.CountLocks(); err == nil {
			gauge(descLocksHeld, c.Held)
			gauge(descLocksWaiting, c.Waiting)
			gauge(descLocksDelayed, c.Delayed)
		}
		gauge(descWatches, s.front.hub.Watchers())
		gauge(descConnections, s.front.quic.Connections())
		n := s.fsm.DecodeErrors()
		if m := s.metrics; m != nil && m.ops != nil {
			if seen := m.ops.decodeSeen.Swap(n); n > seen {
				m.ops.decode.Add(float64(n - seen))
			}
		}
		ch <- prometheus.MustNewConstMetric(descDecodeErrors, prometheus.CounterValue, float64(n), id)
	}
}
