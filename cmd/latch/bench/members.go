package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/latch-io/latch/client"
)

// MemberLoad is what one member did over a read scenario's measured phase
// (Config.MemberCPU): the reads it answered and the CPU it spent, against
// its CPU budget when it has one.
type MemberLoad struct {
	ID string `json:"id"`
	// Role is leader, follower or learner, as the member list said before
	// the phase.
	Role string `json:"role"`
	// Reads is how many reads it answered over the phase, stale and
	// linearizable (latch_reads_total), whoever sent them.
	Reads       int     `json:"reads"`
	ReadsPerSec float64 `json:"reads_per_sec"`
	// CPUPercent is its process CPU over the phase in % of one core
	// (process_cpu_seconds_total).
	CPUPercent float64 `json:"cpu_percent"`
	// CPUMicrosPerRead is that CPU over Reads, in µs; nil when it
	// answered none.
	CPUMicrosPerRead *float64 `json:"cpu_us_per_read,omitempty"`
	// BudgetPercent is the CPU cap of its cgroup in % of one core, for a
	// member on this host in a capped group (cluster.sh CPU=...); 0 for
	// none.
	BudgetPercent float64 `json:"budget_percent,omitempty"`
	// ThrottledPercent is the share of the scheduling periods over the
	// phase in which the member had used up its budget and was held
	// (cpu.stat nr_throttled / nr_periods): near 100, the budget is what
	// limits it. Nil without a budget.
	ThrottledPercent *float64 `json:"throttled_percent,omitempty"`
}

// Member roles in MemberLoad.
const (
	roleLeader   = "leader"
	roleFollower = "follower"
	roleLearner  = "learner"
)

func roleOf(m client.MemberInfo) string {
	switch {
	case m.Leader:
		return roleLeader
	case m.Voter:
		return roleFollower
	}
	return roleLearner
}

// memberProbe is one member being measured.
type memberProbe struct {
	load   MemberLoad
	sc     *scraper
	budget cpuBudget
	capped bool
	before memberSample
}

// memberSample is one reading of a member's counters.
type memberSample struct {
	at                 time.Time
	cpuSeconds, reads  float64
	periods, throttled int64
}

// memberLoads starts measuring every member when cfg.MemberCPU: it takes
// the "before" sample now and returns the function that takes the
// "after" one and fills rep.Members. nil when not asked for or the
// members cannot be listed (logged: the measurement of the scenario
// stands without them).
func (r *runner) memberLoads() func(rep *Report) {
	if !r.cfg.MemberCPU {
		return nil
	}
	ctx, cancel := r.opCtx()
	defer cancel()
	members, err := r.ctl.Members(ctx)
	if err != nil {
		r.logf("member CPU not measured: %v", err)
		return nil
	}
	var probes []*memberProbe
	var skipped []string // notes: the table should not hide a member
	skip := func(m client.MemberInfo, format string, a ...any) {
		skipped = append(skipped, fmt.Sprintf("member %s (%s) not measured: ", m.ID, roleOf(m))+fmt.Sprintf(format, a...))
	}
	for _, m := range members {
		addr, err := memberAdmin(m)
		if err != nil {
			skip(m, "%v", err)
			continue
		}
		p := &memberProbe{load: MemberLoad{ID: m.ID, Role: roleOf(m)}, sc: newScraper(addr, r.cfg.OpTimeout, r.cfg.Client.TLS)}
		st, err := p.sc.status(ctx)
		if err != nil || st.ID != m.ID {
			skip(m, "its status says %q (%v)", st.ID, err)
			continue
		}
		// Only a process of this host can be looked up by its pid.
		if host, _, _ := net.SplitHostPort(addr); isLoopback(host) && st.PID > 0 {
			p.budget, p.capped = readCPUBudget("/", st.PID)
		}
		if p.before, err = p.sample(ctx); err != nil {
			skip(m, "%v", err)
			continue
		}
		probes = append(probes, p)
	}
	return func(rep *Report) {
		ctx, cancel := r.opCtx()
		defer cancel()
		rep.Notes = append(rep.Notes, skipped...)
		for _, p := range probes {
			after, err := p.sample(ctx)
			if err != nil {
				rep.Notes = append(rep.Notes, fmt.Sprintf("member %s (%s) not measured after the run: %v", p.load.ID, p.load.Role, err))
				continue
			}
			rep.Members = append(rep.Members, p.loadTo(after))
		}
		slices.SortFunc(rep.Members, func(a, b MemberLoad) int { return cmp.Compare(a.ID, b.ID) })
	}
}

// sample reads the member's CPU and reads answered, and its group's
// throttling when it has a budget.
func (p *memberProbe) sample(ctx context.Context) (memberSample, error) {
	reads := func(kind string) string {
		return `latch_reads_total{kind="` + kind + `",member="` + p.load.ID + `"}`
	}
	var vals map[string]float64
	err := p.sc.get(ctx, "/metrics", func(rd io.Reader) error {
		var err error
		vals, err = parseMetrics(rd, seriesCPU, reads("stale"), reads("linearizable"))
		return err
	})
	if err != nil {
		return memberSample{}, err
	}
	for _, name := range []string{seriesCPU, reads("stale"), reads("linearizable")} {
		if _, ok := vals[name]; !ok {
			return memberSample{}, fmt.Errorf("%w: %s/metrics has no %s", ErrMetrics, p.sc.addr, name)
		}
	}
	s := memberSample{at: time.Now(), cpuSeconds: vals[seriesCPU], reads: vals[reads("stale")] + vals[reads("linearizable")]}
	if p.capped {
		if s.periods, s.throttled, err = p.budget.throttling(); err != nil {
			return memberSample{}, err
		}
	}
	return s, nil
}

// loadTo is the member's load from its "before" sample to after.
func (p *memberProbe) loadTo(after memberSample) MemberLoad {
	l := p.load
	secs := after.at.Sub(p.before.at).Seconds()
	cpu := after.cpuSeconds - p.before.cpuSeconds
	l.Reads = int(after.reads - p.before.reads)
	if secs > 0 {
		l.ReadsPerSec = float64(l.Reads) / secs
		l.CPUPercent = cpu / secs * 100
	}
	if l.Reads > 0 {
		us := cpu * 1e6 / float64(l.Reads)
		l.CPUMicrosPerRead = &us
	}
	if p.capped {
		l.BudgetPercent = p.budget.cores * 100
		if n := after.periods - p.before.periods; n > 0 {
			pct := float64(after.throttled-p.before.throttled) / float64(n) * 100
			l.ThrottledPercent = &pct
		}
	}
	return l
}

// memberAdmin is m's admin address as this host reaches it: an address
// bound to every interface (":7422", "0.0.0.0:7422") is reached at the
// host of m's client address.
func memberAdmin(m client.MemberInfo) (string, error) {
	if m.HTTPAddr == "" {
		return "", fmt.Errorf("%w: member %s has none in the member list", ErrNoAdmin, m.ID)
	}
	host, port, err := net.SplitHostPort(m.HTTPAddr)
	if err != nil {
		return "", fmt.Errorf("%w: member %s: %q: %v", ErrNoAdmin, m.ID, m.HTTPAddr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if chost, _, err := net.SplitHostPort(m.ClientAddr); err == nil && chost != "" && !net.ParseIP(chost).IsUnspecified() {
			host = chost
		}
	}
	return net.JoinHostPort(host, port), nil
}

// memberClientAddr is m's client address as this host reaches it: one
// bound to every interface is reached at the host of the first of
// endpoints.
func memberClientAddr(m client.MemberInfo, endpoints []string) (string, error) {
	host, port, err := net.SplitHostPort(m.ClientAddr)
	if err != nil {
		return "", fmt.Errorf("%w: member %s: client address %q: %v", ErrBadConfig, m.ID, m.ClientAddr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if len(endpoints) > 0 {
			if h, _, err := net.SplitHostPort(endpoints[0]); err == nil && h != "" {
				host = h
			}
		}
	}
	return net.JoinHostPort(host, port), nil
}

// isLoopback reports whether host is "localhost" or a loopback IP.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// adminScraper is one member's admin endpoint.
type adminScraper struct {
	id string
	sc *scraper
}

// adminScrapers reads the member list and returns a scraper for the admin
// endpoint of every member whose address resolves (memberAdmin), each
// request bounded by timeout; those without one are left out.
func (r *runner) adminScrapers(timeout time.Duration) ([]adminScraper, error) {
	ctx, cancel := r.opCtx()
	members, err := r.ctl.Members(ctx)
	cancel()
	if err != nil {
		return nil, err
	}
	var out []adminScraper
	for _, m := range members {
		if addr, err := memberAdmin(m); err == nil {
			out = append(out, adminScraper{id: m.ID, sc: newScraper(addr, timeout, r.cfg.Client.TLS)})
		}
	}
	return out, nil
}
