package server

import (
	"sync"
	"time"

	gometrics "github.com/hashicorp/go-metrics"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/latch-io/latch/server/quicfront"
	"github.com/latch-io/latch/server/raftnode"
)

// Metrics live in prometheus' default registry, which also carries the Go
// and process collectors, and raft's own go-metrics series through a global
// sink (raftnode.RaftSink). Both registrations are process-wide, so they happen once; a member
// adds itself to memberCollector and labels its series with its id.
var (
	registerOnce sync.Once

	proposalsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "latch_proposals_total",
		Help: "Commands proposed by this member as leader, by result (ok, rejected by the namespace, error).",
	}, []string{"member", "result"})
	proposalSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "latch_proposal_duration_seconds",
		Help:    "Time from Propose to the command applied on the leader.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18), // 100µs .. ~13s
	}, []string{"member"})
	verifiesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "latch_leader_verifies_total",
		Help: "Leadership confirmation rounds (shared by concurrent linearizable reads).",
	}, []string{"member"})
	refusedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "latch_member_traffic_refused_total",
		Help: "Raft connections whose mutual TLS handshake failed (what=raft) and admin requests refused for want of a member or admin identity (what=admin).",
	}, []string{"member", "what"})
	members = &memberCollector{servers: map[*Server]struct{}{}}
)

// countRefused counts one refused raft connection or admin request. It may
// run before the member's metrics exist (raft accepts from New on).
func (s *Server) countRefused(what string) {
	registerMetrics()
	refusedTotal.WithLabelValues(s.cfg.ID, what).Inc()
}

func registerMetrics() {
	registerOnce.Do(func() {
		sink := raftnode.NewRaftSink()
		prometheus.MustRegister(proposalsTotal, proposalSeconds, verifiesTotal, refusedTotal, members, sink)
		conf := gometrics.DefaultConfig("")
		conf.EnableHostname = false
		conf.EnableRuntimeMetrics = false // the Go collector covers these
		conf.EnableServiceLabel = false
		gometrics.NewGlobal(conf, sink)
	})
}

// serverMetrics are one member's handles into the shared vectors.
type serverMetrics struct {
	s        *Server
	ok       prometheus.Counter
	rejected prometheus.Counter
	errored  prometheus.Counter
	latency  prometheus.Observer
	verifies prometheus.Counter
	ops      *opsMetrics
}

func newServerMetrics(s *Server) *serverMetrics {
	registerMetrics()
	id := s.cfg.ID
	m := &serverMetrics{
		s:        s,
		ok:       proposalsTotal.WithLabelValues(id, "ok"),
		rejected: proposalsTotal.WithLabelValues(id, "rejected"),
		errored:  proposalsTotal.WithLabelValues(id, "error"),
		latency:  proposalSeconds.WithLabelValues(id),
		verifies: verifiesTotal.WithLabelValues(id),
	}
	// Exported from the start, at 0, so an alert can rely on the series.
	for _, what := range []string{"raft", "admin"} {
		refusedTotal.WithLabelValues(id, what)
	}
	m.ops = newOpsMetrics(s)
	members.add(s)
	return m
}

func (m *serverMetrics) unregister() { members.remove(m.s) }

func (m *serverMetrics) proposed(result string, start time.Time) {
	switch result {
	case "ok":
		m.ok.Inc()
	case "rejected":
		m.rejected.Inc()
	default:
		m.errored.Inc()
		return
	}
	m.latency.Observe(time.Since(start).Seconds())
}

// memberCollector reads each live member's indexes at scrape time.
type memberCollector struct {
	mu      sync.Mutex
	servers map[*Server]struct{}
}

var (
	descApplied  = prometheus.NewDesc("latch_applied_index", "Last raft index applied to the namespace.", []string{"member"}, nil)
	descCommit   = prometheus.NewDesc("latch_commit_index", "Raft commit index known to this member.", []string{"member"}, nil)
	descLast     = prometheus.NewDesc("latch_last_log_index", "Last raft log index stored by this member.", []string{"member"}, nil)
	descTerm     = prometheus.NewDesc("latch_term", "Current raft term.", []string{"member"}, nil)
	descLeader   = prometheus.NewDesc("latch_is_leader", "1 when this member is the ready leader.", []string{"member"}, nil)
	descRestores = prometheus.NewDesc("latch_snapshot_restores_total", "Snapshots installed into the namespace since start.", []string{"member"}, nil)

	descStreams        = prometheus.NewDesc("latch_request_streams", "Client requests in flight, all connections: streams and calls on mux streams (cap: --max-streams).", []string{"member"}, nil)
	descRefused        = prometheus.NewDesc("latch_refused_total", "Client connections, requests, sessions and watches refused by a cap, by cap (its latchd flag).", []string{"member", "cap"}, nil)
	descWatchBacklog   = prometheus.NewDesc("latch_watch_backlog_bytes", "Bytes of watch events held for clients (path + 48 per event), all watches (cap: --max-watch-backlog-bytes).", []string{"member"}, nil)
	descBacklogResyncs = prometheus.NewDesc("latch_watch_backlog_resyncs_total", "Watches ended with a resync because a watch byte cap was reached (--max-watch-backlog-bytes or --max-watch-bytes-per-conn).", []string{"member"}, nil)
	descHeldLocks      = prometheus.NewDesc("latch_held_locks_followed", "Held locks this member follows for its client connections (no stream, no request slot each).", []string{"member"}, nil)
	descPingsEchoed    = prometheus.NewDesc("latch_liveness_pings_total", "Liveness pings echoed to clients (QUIC datagrams; a client sends them only while a call waits on this member).", []string{"member"}, nil)
	descHandshakes     = prometheus.NewDesc("latch_client_handshakes_total", "Client connections accepted, by whether their TLS handshake resumed an earlier session (a ticket: no certificates exchanged) or was a full one.", []string{"member", "resumed"}, nil)
	descCapLimit       = prometheus.NewDesc("latch_cap_limit", "A client cap's limit (latchd --max-... flags).", []string{"member", "cap"}, nil)
	descCapUsed        = prometheus.NewDesc("latch_cap_used", "What a cap counts now on this member (per-identity caps: the busiest identity).", []string{"member", "cap"}, nil)
	descAdmRefused     = prometheus.NewDesc("latch_admission_refused_total", "Client connection attempts refused before their handshake (reason rate, in_flight, failing_host) and leader probes dropped (reason probe) by admission control.", []string{"member", "reason"}, nil)
	descAdmRate        = prometheus.NewDesc("latch_admission_handshake_rate", "Full TLS handshakes per second admission control lets in now (lowered while the scheduler runs late).", []string{"member"}, nil)
	descAdmEnds        = prometheus.NewDesc("latch_admission_handshakes_total", "Admitted client handshakes by how they ended: full, resumed, failed (TLS refused the client's credentials) or abandoned (the client went away or silent).", []string{"member", "end"}, nil)
	descAdmInFlight    = prometheus.NewDesc("latch_admission_handshakes_in_flight", "Client handshakes admitted and not yet ended (cap: --max-handshakes-in-flight).", []string{"member"}, nil)
	descAdmQueue       = prometheus.NewDesc("latch_admission_reservations_total", "Admission queue events for clients that asked to connect: made (a slot now or later), used (the client came and was let in uncharged), expired (it did not come), busy (the queue was full: ask again later).", []string{"member", "event"}, nil)
	descAdmQueueWait   = prometheus.NewDesc("latch_admission_queue_wait_seconds_total", "Waits given with reservations, summed (divide by the made reservations for the mean).", []string{"member"}, nil)
	descAdmQueueNow    = prometheus.NewDesc("latch_admission_queue_seconds", "The wait a reconnecting client asking now would be given.", []string{"member"}, nil)
	descAdmQueueHeld   = prometheus.NewDesc("latch_admission_reservations_held", "Reservations made and not yet used or expired.", []string{"member"}, nil)
	descSchedLag       = prometheus.NewDesc("latch_scheduler_lag_seconds", "Worst lateness of a 10ms ticker over the last 100ms: how long runnable goroutines wait for a CPU.", []string{"member"}, nil)
	descResumeFailures = prometheus.NewDesc("latch_resume_failures_total", "Session resumes that failed for a wrong secret or identity, refused by the limiter or not.", []string{"member"}, nil)
	descResumeRefused  = prometheus.NewDesc("latch_resume_refused_total", "Session resumes refused by the failed-resume limiter, by what was out of tokens: the connection or the host (--max-failed-resumes-per-host).", []string{"member", "by"}, nil)
	descCapRefusals    = prometheus.NewDesc("latch_cap_refusals_total", "Requests refused because a cap was reached.", []string{"member", "cap"}, nil)
)

func (c *memberCollector) add(s *Server) {
	c.mu.Lock()
	c.servers[s] = struct{}{}
	c.mu.Unlock()
}

func (c *memberCollector) remove(s *Server) {
	c.mu.Lock()
	delete(c.servers, s)
	c.mu.Unlock()
}

func (c *memberCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descApplied, descCommit, descLast, descTerm, descLeader, descRestores,
		descStreams, descRefused, descWatchBacklog, descBacklogResyncs, descHeldLocks, descPingsEchoed,
		descHandshakes, descCapLimit, descCapUsed, descAdmRefused, descAdmRate, descAdmEnds, descAdmInFlight, descAdmQueue, descAdmQueueWait, descAdmQueueNow, descAdmQueueHeld, descSchedLag, descResumeFailures, descResumeRefused} {
		ch <- d
	}
	for _, d := range readDescs {
		ch <- d
	}
}

func (c *memberCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]bool{}
	for s := range c.servers {
		id := s.cfg.ID
		if seen[id] || s.raft == nil {
			// Two live members with one id only happen in tests; a
			// duplicate series would fail the whole scrape.
			continue
		}
		seen[id] = true
		gauge := func(d *prometheus.Desc, v uint64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), id)
		}
		gauge(descApplied, s.fsmApplied())
		gauge(descCommit, s.raft.CommitIndex())
		gauge(descLast, s.raft.LastIndex())
		gauge(descTerm, s.raft.CurrentTerm())
		leader := uint64(0)
		if s.IsLeader() {
			leader = 1
		}
		gauge(descLeader, leader)
		ch <- prometheus.MustNewConstMetric(descRestores, prometheus.CounterValue, float64(s.fsm.Restores()), id)
		if f := s.front; f != nil {
			f.collect(ch, id)
			for _, c := range f.caps() {
				ch <- prometheus.MustNewConstMetric(descCapLimit, prometheus.GaugeValue, float64(c.limit), id, c.name)
				ch <- prometheus.MustNewConstMetric(descCapUsed, prometheus.GaugeValue, float64(c.used), id, c.name)
				ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(c.refusals), id, c.name)
			}
		}
	}
}

// collect reports the client front's global caps: what is held and what
// was refused.
func (f *front) collect(ch chan<- prometheus.Metric, id string) {
	queued, resyncs, connResyncs := f.hub.BacklogStats()
	resyncs += connResyncs
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, id)
	}
	st := f.quic.Stats()
	gauge(descStreams, float64(st.Streams))
	gauge(descWatchBacklog, float64(queued))
	gauge(descHeldLocks, float64(f.locks.HeldCount()))
	ch <- prometheus.MustNewConstMetric(descBacklogResyncs, prometheus.CounterValue, float64(resyncs), id)
	ch <- prometheus.MustNewConstMetric(descResumeFailures, prometheus.CounterValue, float64(st.ResumeFailures), id)
	ch <- prometheus.MustNewConstMetric(descResumeRefused, prometheus.CounterValue, float64(st.ResumeRefusedConn), id, "connection")
	ch <- prometheus.MustNewConstMetric(descResumeRefused, prometheus.CounterValue, float64(st.ResumeRefusedHost), id, "host")
	ch <- prometheus.MustNewConstMetric(descPingsEchoed, prometheus.CounterValue, float64(st.PingsEchoed), id)
	ch <- prometheus.MustNewConstMetric(descHandshakes, prometheus.CounterValue, float64(st.FullHandshakes), id, "false")
	ch <- prometheus.MustNewConstMetric(descHandshakes, prometheus.CounterValue, float64(st.ResumedHandshakes), id, "true")
	ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(st.RefusedConns), id, "max-conns")
	ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(st.RefusedStreams), id, "max-streams")
	adm := &st.Admission
	for _, reason := range quicfront.RefusalReasons {
		ch <- prometheus.MustNewConstMetric(descAdmRefused, prometheus.CounterValue, float64(adm.Refused[reason]), id, reason)
	}
	gauge(descAdmRate, adm.Rate)
	gauge(descAdmInFlight, float64(adm.InFlight))
	for end, n := range adm.Ends {
		ch <- prometheus.MustNewConstMetric(descAdmEnds, prometheus.CounterValue, float64(n), id, end)
	}
	for outcome, n := range adm.Queue {
		ch <- prometheus.MustNewConstMetric(descAdmQueue, prometheus.CounterValue, float64(n), id, outcome)
	}
	ch <- prometheus.MustNewConstMetric(descAdmQueueWait, prometheus.CounterValue, adm.QueueWaited.Seconds(), id)
	gauge(descAdmQueueNow, adm.QueueNow.Seconds())
	gauge(descAdmQueueHeld, float64(adm.QueueHeld))
	gauge(descSchedLag, adm.SchedLag.Seconds())
	f.collectReads(ch, id)
}
