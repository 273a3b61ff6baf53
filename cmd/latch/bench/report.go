package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what one run measured. Its JSON form (-o json) has stable
// snake_case names; durations are milliseconds.
type Report struct {
	Scenario string `json:"scenario"`
	// Ops is how many operations completed: gets, creates, Lock+Unlock
	// cycles (lock, contended) or sessions opened (sessions).
	Ops int `json:"ops"`
	// Concurrency and Conns are the run's goroutines (contended: clients;
	// sessions: concurrent opens) and client connections.
	Concurrency int `json:"concurrency"`
	Conns       int `json:"conns"`
	// Elapsed is the measured phase's wall time; OpsPerSec is Ops over it.
	Elapsed   Millis  `json:"elapsed_ms"`
	OpsPerSec float64 `json:"ops_per_sec"`
	// Latency has one entry per kind of operation timed, in the order
	// they happen (lock: acquire, then release).
	Latency []OpLatency `json:"latency"`
	// LeaderCPUMillisPerOp is the leader process's CPU time over the
	// measured phase per operation, in milliseconds, for set, get, stale-get,
	// cached-get and cached-set (Config.LeaderCPU; nil when not measured
	// or the leader changed or could not be scraped). Contended reports it
	// per cycle in Contention.
	LeaderCPUMillisPerOp *float64 `json:"leader_cpu_ms_per_op,omitempty"`
	// ReadMembers counts stale-get's connections by the member their
	// stale reads went to at the end of the run ("" : the leader).
	ReadMembers map[string]int `json:"read_members,omitempty"`
	// Members is what each member answered and spent over a read
	// scenario's measured phase (Config.MemberCPU), by id.
	Members []MemberLoad `json:"members,omitempty"`

	Contention *Contention  `json:"contention,omitempty"`
	Sessions   *SessionLoad `json:"sessions,omitempty"`
	Storm      *Storm       `json:"storm,omitempty"`

	// Truncated is set when the run stopped early (MaxTime passed or it
	// was interrupted): the figures cover what completed.
	Truncated bool `json:"truncated,omitempty"`
	// Failed is the error of a run of `latch bench all` that did not
	// complete; the other figures are then empty.
	Failed string `json:"failed,omitempty"`
	// Notes say how to read the figures.
	Notes []string `json:"notes,omitempty"`
}

// OpLatency is the latency summary of one kind of operation.
type OpLatency struct {
	Op string `json:"op"`
	Latency
}

// Contention is what the contended scenario adds.
type Contention struct {
	Clients int `json:"clients"`
	Locks   int `json:"locks"`
	// RandomLock: every cycle took a random lock (else client i lock i
	// mod Locks).
	RandomLock bool `json:"random_lock,omitempty"`
	// MinGrants and MaxGrants are the fewest and most grants one client
	// got; Fairness is their ratio, null when a client got none.
	MinGrants int      `json:"min_grants"`
	MaxGrants int      `json:"max_grants"`
	Fairness  *float64 `json:"fairness"`
	// LeaderCPUMillisPerOp is the leader process's CPU time over the
	// window per cycle, in milliseconds (Config.LeaderCPU; nil when not
	// measured or the leader changed or could not be scraped).
	LeaderCPUMillisPerOp *float64 `json:"leader_cpu_ms_per_op,omitempty"`
	// LeaderPingsPerOp is the liveness pings the leader echoed over the
	// window per cycle (Config.LeaderCPU; nil like LeaderCPUMillisPerOp):
	// what waiting clients cost it besides the handoffs.
	LeaderPingsPerOp *float64 `json:"leader_pings_per_op,omitempty"`
	// Elections is how much the highest raft term of the members rose
	// over the window: 0 when the leader kept its place (want 0); nil
	// when no member's admin /v1/status could be read (it wants an admin
	// certificate).
	Elections *int `json:"elections,omitempty"`
	// GoodputPercent is the throughput in percent of Config.Reference
	// (the peak of a reference run), when given.
	GoodputPercent *float64 `json:"goodput_percent,omitempty"`
}

// SessionLoad is what the sessions scenario adds.
type SessionLoad struct {
	Sessions int    `json:"sessions"`
	TTL      Millis `json:"ttl_ms"`
	// OpenRate is sessions established per second (connections included
	// when each session has its own).
	OpenRate float64 `json:"open_per_sec"`
	// Resumed and FullHandshakes count the leader's client connections
	// accepted while the sessions opened, by TLS handshake
	// (latch_client_handshakes_total); nil when its /metrics has no such
	// series.
	Resumed        *int `json:"resumed_handshakes,omitempty"`
	FullHandshakes *int `json:"full_handshakes,omitempty"`
	// Settle is the pause between the last open and the window.
	Settle Millis `json:"settle_ms"`
	Window Millis `json:"window_ms"`
	// Leader and LeaderAdmin name the member measured.
	Leader      string `json:"leader"`
	LeaderAdmin string `json:"leader_admin"`
	// LeaderCPUPercent is the leader process's CPU over the window, in
	// percent of one core; LeaderIdleCPUPercent the same over Window/5
	// before the first open (raft heartbeats, tickers: the baseline).
	LeaderCPUPercent     float64 `json:"leader_cpu_percent"`
	LeaderIdleCPUPercent float64 `json:"leader_idle_cpu_percent"`
	// RSSBefore is the leader's resident memory before the sessions were
	// opened, RSSHeld at the end of the window; RSSPerSession is the
	// difference over Sessions (bytes; may be negative when the runtime
	// returned memory meanwhile).
	RSSBefore     int64   `json:"rss_before_bytes"`
	RSSHeld       int64   `json:"rss_held_bytes"`
	RSSPerSession float64 `json:"rss_per_session_bytes"`
	// LiveHeapPerSession is the same difference of the leader's live Go
	// heap as of its last GC, estimated from the GC goal
	// (go_memstats_next_gc_bytes / (1 + go_gc_gogc_percent/100)), when its
	// /metrics has those series: unlike RSS it does not count garbage not
	// yet collected nor memory the runtime has not returned.
	LiveHeapPerSession *float64 `json:"live_heap_per_session_bytes,omitempty"`
	// GoroutinesBefore and GoroutinesHeld are the leader's goroutines
	// (go_goroutines) when RSSBefore and RSSHeld were read;
	// GoroutinesPerConn and StackPerConn (bytes of goroutine stacks,
	// go_memstats_stack_inuse_bytes) are the differences over the
	// connections opened. Zero when its /metrics has no such series.
	GoroutinesBefore  int     `json:"goroutines_before,omitempty"`
	GoroutinesHeld    int     `json:"goroutines_held,omitempty"`
	GoroutinesPerConn float64 `json:"goroutines_per_conn,omitempty"`
	StackPerConn      float64 `json:"stack_per_conn_bytes,omitempty"`
	// BenchCPUPercent is this process's CPU over the window, in percent
	// of one core: the client side of the keepalives.
	BenchCPUPercent float64 `json:"bench_cpu_percent"`
	// Lost counts sessions that ended while held (expired): nonzero means
	// the cluster could not keep up.
	Lost int `json:"lost"`
	// CloseRate is sessions closed per second at the end.
	CloseRate float64 `json:"close_per_sec"`
}

// Text is the report as an aligned table for people.
func (r *Report) Text() string {
	var b strings.Builder
	r.WriteTable(&b)
	return b.String()
}

// WriteTable writes the report as an aligned table.
func (r *Report) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, a...)) }
	row("scenario", "%s", r.Scenario)
	if r.Failed != "" {
		row("failed", "%s", r.Failed)
		tw.Flush()
		return
	}
	switch r.Scenario {
	case ScenarioSessions, ScenarioStorm:
		row("sessions", "%d opened by %s on %s", r.Ops, plural(r.Concurrency, "opener"), plural(r.Conns, "connection"))
		row("elapsed", "%s", dur(r.Elapsed))
		row("open rate", "%s sessions/s", num(r.OpsPerSec))
	case ScenarioContended:
		if c := r.Contention; c != nil {
			pick := ""
			if c.RandomLock {
				pick = ", a random one per cycle"
			}
			row("clients", "%s on %s, %s%s", plural(c.Clients, "session"), plural(r.Conns, "connection"), plural(c.Locks, "lock"), pick)
		}
		row("cycles", "%d lock+unlock", r.Ops)
		row("elapsed", "%s", dur(r.Elapsed))
		row("throughput", "%s acquire+release/s", num(r.OpsPerSec))
	default:
		what := "operations"
		if r.Scenario == ScenarioLock {
			what = "lock+unlock"
		}
		row("ops", "%d %s by %s on %s", r.Ops, what, plural(r.Concurrency, "goroutine"), plural(r.Conns, "connection"))
		row("elapsed", "%s", dur(r.Elapsed))
		row("throughput", "%s ops/s", num(r.OpsPerSec))
		if r.LeaderCPUMillisPerOp != nil {
			row("leader CPU", "%.4f ms per operation", *r.LeaderCPUMillisPerOp)
		}
	}
	if c := r.Contention; c != nil {
		fair := "unbounded (a client got no grant)"
		if c.Fairness != nil {
			fair = strconv.FormatFloat(*c.Fairness, 'f', 2, 64)
		}
		row("grants/client", "min %d, max %d, fairness (max/min) %s", c.MinGrants, c.MaxGrants, fair)
		if c.LeaderCPUMillisPerOp != nil {
			row("leader CPU", "%.3f ms per cycle", *c.LeaderCPUMillisPerOp)
		}
		if c.LeaderPingsPerOp != nil {
			row("leader pings", "%.2f liveness pings echoed per cycle", *c.LeaderPingsPerOp)
		}
		if c.Elections != nil {
			row("elections", "%d during the window (raft term rise; want 0)", *c.Elections)
		}
		if c.GoodputPercent != nil {
			row("goodput", "%.0f%% of the reference", *c.GoodputPercent)
		}
	}
	if s := r.Sessions; s != nil {
		row("session TTL", "%s", dur(s.TTL))
		if s.Resumed != nil && s.FullHandshakes != nil {
			row("TLS handshakes", "%d resumed, %d full (the leader's)", *s.Resumed, *s.FullHandshakes)
		}
		row("settle, window", "%s, %s", dur(s.Settle), dur(s.Window))
		row("leader", "%s (admin %s)", s.Leader, s.LeaderAdmin)
		row("leader CPU", "%.1f%% of one core (%.1f%% before the sessions)", s.LeaderCPUPercent, s.LeaderIdleCPUPercent)
		row("leader RSS", "%s before, %s held: %s per session", bytes(float64(s.RSSBefore)), bytes(float64(s.RSSHeld)), bytes(s.RSSPerSession))
		if s.LiveHeapPerSession != nil {
			row("leader live heap", "%s per session (from the GC goal)", bytes(*s.LiveHeapPerSession))
		}
		if s.GoroutinesHeld > 0 {
			row("goroutines", "leader: %d before, %d held: %.2f and %s of stack per connection", s.GoroutinesBefore, s.GoroutinesHeld, s.GoroutinesPerConn, bytes(s.StackPerConn))
		}
		row("bench CPU", "%.1f%% of one core", s.BenchCPUPercent)
		row("lost sessions", "%d", s.Lost)
		row("close rate", "%s sessions/s", num(s.CloseRate))
	}
	if s := r.Storm; s != nil {
		row("leader changes", "%d while opening and holding (want 0)", s.OpenLeaderChanges)
		if s.OpenError != "" {
			row("open failed", "%s", s.OpenError)
		}
		if k := s.Kill; k != nil {
			if k.Signal == "stall" || k.Signal == "freeze" {
				row("signal", "the leader %s's disk %s; watched %s", k.Leader, map[string]string{"stall": "stalled (raft log writes held)", "freeze": "frozen (fsfreeze)"}[k.Signal], dur(k.Observe))
				if k.Signal == "stall" {
					row("stalled leader exited", "%s after the stall (0: not within the watch)", dur(k.LeaderExit))
				}
			} else {
				row("signal", "SIG%s to the leader %s; watched %s", strings.ToUpper(k.Signal), k.Leader, dur(k.Observe))
			}
			row("first write", "committed %s after the signal (0: not within the watch)", dur(k.Write))
			row("leader changes", "%d after the signal (want 1), new leader %s", k.LeaderChanges, k.NewLeader)
			row("lost, failed", "%d sessions lost (%d ended by the cluster, %d given up by their client), %d first calls failed", k.Lost, k.LostByServer, k.Lost-k.LostByServer, k.Failed)
			row("reconnect", "p50 %s, p90 %s, p99 %s, max %s (%d clients)", dur(k.Reconnect.P50), dur(k.Reconnect.P90), dur(k.Reconnect.P99), dur(k.Reconnect.Max), k.Reconnect.Count)
			row("new leader admitted", "%d full and %d resumed handshakes, %d abandoned by their client; %d attempts refused for load", k.FullHandshakes, k.Resumed, k.Abandoned, k.RefusedForLoad)
			row("new leader's queue", "%d slots reserved (%d used, %d expired, mean wait %s), %d busy answers", k.Reserved, k.ReservedUsed, k.ReservedLapse, dur(k.QueueWait), k.Busy)
		}
		if f := s.Flood; f != nil {
			row("lock cycles, quiet", "%s/s, p99 %s (%s)", num(f.QuietCyclesPerSec), dur(f.QuietP99), dur(f.Duration))
			where := "in this process"
			if f.Separate {
				where = "from a process of its own"
			}
			row("lock cycles, flooded", "%s/s, p99 %s; the flood, %s: %d handshakes without a certificate, %d probes", num(f.FloodedCyclesPerSec), dur(f.FloodedP99), where, f.Attempts, f.Probes)
			row("leader changes", "%d under the flood (want 0)", f.LeaderChanges)
		}
	}
	if r.Truncated {
		row("truncated", "yes: stopped early, figures cover what completed")
	}
	tw.Flush()

	if len(r.Latency) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "OP\tCOUNT\tP50\tP90\tP99\tMAX\tMEAN")
		for _, l := range r.Latency {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", l.Op, l.Count, l.P50, l.P90, l.P99, l.Max, l.Mean)
		}
		tw.Flush()
	}
	if len(r.Members) > 0 {
		fmt.Fprintln(w)
		writeMembers(w, r.Members)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\nnote: %s", n)
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(w)
	}
}

// dur formats m as a duration rounded to the millisecond ("3.333s").
func dur(m Millis) string { return time.Duration(m).Round(time.Millisecond).String() }

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// num formats a rate with one decimal.
func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

// bytes formats a byte count in B, KiB or MiB.
func bytes(f float64) string {
	a := f
	if a < 0 {
		a = -a
	}
	switch {
	case a >= 1<<20:
		return strconv.FormatFloat(f/(1<<20), 'f', 1, 64) + " MiB"
	case a >= 1<<10:
		return strconv.FormatFloat(f/(1<<10), 'f', 1, 64) + " KiB"
	}
	return strconv.FormatFloat(f, 'f', 0, 64) + " B"
}

// writeMembers writes the per-member table: reads answered and CPU, with
// the CPU budget and how often it was used up when the member has one.
func writeMembers(w io.Writer, ms []MemberLoad) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tROLE\tREADS\tREADS/S\tCPU\tCPU/READ\tBUDGET\tTHROTTLED")
	total, rate := 0, 0.0
	for _, m := range ms {
		perRead, budget, throttled := "-", "-", "-"
		if m.CPUMicrosPerRead != nil {
			perRead = strconv.FormatFloat(*m.CPUMicrosPerRead, 'f', 1, 64) + "µs"
		}
		if m.BudgetPercent > 0 {
			budget = strconv.FormatFloat(m.BudgetPercent, 'f', 0, 64) + "%"
		}
		if m.ThrottledPercent != nil {
			throttled = strconv.FormatFloat(*m.ThrottledPercent, 'f', 0, 64) + "% of periods"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%.1f%%\t%s\t%s\t%s\n", m.ID, m.Role, m.Reads, num(m.ReadsPerSec), m.CPUPercent, perRead, budget, throttled)
		total, rate = total+m.Reads, rate+m.ReadsPerSec
	}
	fmt.Fprintf(tw, "all\t\t%d\t%s\t\t\t\t\n", total, num(rate))
	tw.Flush()
}
