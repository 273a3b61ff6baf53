package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"
)

// ScenarioAll is not a scenario of its own: RunAll runs the set below, one
// after the other, against the same cluster.
const ScenarioAll = "all"

// Parameters of the rows RunAll measures.
const (
	allProposers      = 64
	allProposerConns  = 8
	allProposerOps    = 20000
	allContendedConns = DefaultContendedClients // one connection per client
	allSessionsWindow = 2 * time.Second
)

// AllConfigs is what RunAll runs, in order, derived from base (cluster,
// TLS, Ops, Duration, Sessions, timeouts, Prefix unset): uncontended lock,
// set, watch with base.Ops operations; 64 clients with a connection each
// on base.Locks locks, a random lock per cycle, for base.Duration; 64
// proposers setting their own nodes over 8 connections (20,000 sets); and
// base.Sessions sessions with a connection each, held for 2 s.
func AllConfigs(base Config) []Config {
	one := func(scenario string, edit func(*Config)) Config {
		c := base
		c.Scenario = scenario
		c.Concurrency, c.Conns, c.Prefix = 0, 0, ""
		if edit != nil {
			edit(&c)
		}
		return c
	}
	return []Config{
		one(ScenarioLock, nil),
		one(ScenarioSet, nil),
		one(ScenarioWatch, nil),
		one(ScenarioContended, func(c *Config) {
			c.Concurrency, c.Conns, c.RandomLock = DefaultContendedClients, allContendedConns, true
		}),
		one(ScenarioSet, func(c *Config) {
			c.Concurrency, c.Conns, c.Ops = allProposers, allProposerConns, allProposerOps
		}),
		one(ScenarioSessions, func(c *Config) {
			if c.Sessions == 0 {
				c.Sessions = DefaultSessions
			}
			c.Conns, c.Window = c.Sessions, allSessionsWindow
		}),
	}
}

// RunAll runs AllConfigs(base) one after the other and returns their
// reports, calling each (when not nil) as every one completes. A run that
// fails does not stop the others (on a loaded machine one leader change
// should not cost the whole table): its report holds only the scenario
// and Failed, and the error is returned at the end, joined with the rest.
func RunAll(ctx context.Context, base Config, each func(*Report)) ([]*Report, error) {
	var reps []*Report
	var errs []error
	for _, cfg := range AllConfigs(base) {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		rep, err := Run(ctx, cfg)
		if err != nil {
			errs = append(errs, err)
			rep = &Report{Scenario: cfg.Scenario, Concurrency: cfg.Concurrency, Conns: cfg.Conns, Failed: err.Error()}
		}
		reps = append(reps, rep)
		if each != nil {
			each(rep)
		}
	}
	return reps, errors.Join(errs...)
}

// WriteSummary writes one line per figure of RunAll's reports.
func WriteSummary(w io.Writer, reps []*Report) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WHAT\tFIGURE")
	row := func(what, format string, a ...any) { fmt.Fprintf(tw, "%s\t%s\n", what, fmt.Sprintf(format, a...)) }
	for _, r := range reps {
		if r.Failed != "" {
			row(r.Scenario, "FAILED: %s", r.Failed)
			continue
		}
		switch {
		case r.Scenario == ScenarioLock:
			row("uncontended acquire p50", "%s", p50(r, "acquire"))
			row("uncontended release p50", "%s", p50(r, "release"))
		case r.Scenario == ScenarioSet && r.Concurrency == 1:
			row("set p50", "%s", p50(r, "set"))
		case r.Scenario == ScenarioSet:
			row(fmt.Sprintf("%d proposers (sets)", r.Concurrency), "%s commits/s, p50 %s", num(r.OpsPerSec), p50(r, "set"))
		case r.Scenario == ScenarioWatch:
			row("put start → watch event p50", "%s", p50(r, "put→event"))
		case r.Scenario == ScenarioContended && r.Contention != nil:
			c := r.Contention
			fair := "unbounded"
			if c.Fairness != nil {
				fair = strconv.FormatFloat(*c.Fairness, 'f', 2, 64)
			}
			row(fmt.Sprintf("%d clients (%d conns) on %d locks", c.Clients, r.Conns, c.Locks),
				"%s cycles/s, acquire p99 %s, fairness %s", num(r.OpsPerSec), pct(r, "acquire", 99), fair)
		case r.Scenario == ScenarioSessions:
			row(fmt.Sprintf("%d sessions on %d conns", r.Ops, r.Conns), "%s opened/s", num(r.OpsPerSec))
		}
	}
	tw.Flush()
}

func p50(r *Report, op string) string { return pct(r, op, 50) }

func pct(r *Report, op string, p int) string {
	for _, l := range r.Latency {
		if l.Op == op {
			if p == 99 {
				return l.P99.String()
			}
			return l.P50.String()
		}
	}
	return "-"
}
