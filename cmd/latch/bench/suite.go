package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
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
	for _, r := range reps {
		for _, f := range figures(r) {
			fmt.Fprintf(tw, "%s\t%s\n", f.what, f.value)
		}
	}
	tw.Flush()
}

// figure is one line of the summary: what was measured, and the figure.
type figure struct{ what, value string }

// figures are the summary lines of one report of RunAll.
func figures(r *Report) []figure {
	if r.Failed != "" {
		return []figure{{r.Scenario, "FAILED: " + r.Failed}}
	}
	one := func(what, format string, a ...any) []figure { return []figure{{what, fmt.Sprintf(format, a...)}} }
	switch {
	case r.Scenario == ScenarioLock:
		return []figure{{"uncontended acquire p50", p50(r, "acquire")}, {"uncontended release p50", p50(r, "release")}}
	case r.Scenario == ScenarioSet && r.Concurrency == 1:
		return one("set p50", "%s", p50(r, "set"))
	case r.Scenario == ScenarioSet:
		return one(fmt.Sprintf("%d proposers (sets)", r.Concurrency), "%s commits/s, p50 %s", num(r.OpsPerSec), p50(r, "set"))
	case r.Scenario == ScenarioWatch:
		return one("put start → watch event p50", "%s", p50(r, "put→event"))
	case r.Scenario == ScenarioContended && r.Contention != nil:
		c := r.Contention
		fair := "unbounded"
		if c.Fairness != nil {
			fair = strconv.FormatFloat(*c.Fairness, 'f', 2, 64)
		}
		return one(fmt.Sprintf("%d clients (%d conns) on %d locks", c.Clients, r.Conns, c.Locks),
			"%s cycles/s, acquire p99 %s, fairness %s", num(r.OpsPerSec), pct(r, "acquire", 99), fair)
	case r.Scenario == ScenarioSessions:
		return one(fmt.Sprintf("%d sessions on %d conns", r.Ops, r.Conns), "%s opened/s", num(r.OpsPerSec))
	}
	return nil
}

// RunCompare runs every row of RunAll rounds times against two clusters,
// base (the cluster under test) and baseline (what it is compared with),
// row by row and alternating which of the two goes first, so that both
// see the same moments of a noisy machine. It returns the reports per
// round, in AllConfigs order, for base and for baseline.
func RunCompare(ctx context.Context, base, baseline Config, rounds int) (got, was [][]*Report, err error) {
	var errs []error
	run := func(cfg Config) *Report {
		rep, err := Run(ctx, cfg)
		if err != nil {
			errs = append(errs, err)
			return &Report{Scenario: cfg.Scenario, Concurrency: cfg.Concurrency, Conns: cfg.Conns, Failed: err.Error()}
		}
		return rep
	}
	bs, ws := AllConfigs(base), AllConfigs(baseline)
	for r := range max(rounds, 1) {
		var g, w []*Report
		for i := range bs {
			if ctx.Err() != nil {
				return got, was, errors.Join(append(errs, ctx.Err())...)
			}
			if r%2 == 0 {
				w = append(w, run(ws[i]))
				g = append(g, run(bs[i]))
			} else {
				g = append(g, run(bs[i]))
				w = append(w, run(ws[i]))
			}
		}
		got, was = append(got, g), append(was, w)
	}
	return got, was, errors.Join(errs...)
}

// WriteCompare writes RunCompare's reports: one line per figure, with
// every round's figure for the baseline and for the cluster under test.
func WriteCompare(w io.Writer, got, was [][]*Report) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WHAT\tROUND\tBASELINE\tTHIS CLUSTER")
	if len(got) == 0 {
		tw.Flush()
		return
	}
	value := func(fs []figure, j int) string {
		if len(fs) == 1 && strings.HasPrefix(fs[0].value, "FAILED") {
			return fs[0].value
		}
		if j < len(fs) {
			return fs[j].value
		}
		return "-"
	}
	for i := range got[0] {
		// The row's lines are named by a round where it did not fail.
		names := figures(got[0][i])
		for round := range got {
			if fs := figures(got[round][i]); len(fs) > len(names) {
				names = fs
			}
		}
		for j, name := range names {
			for round := range got {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", name.what, round+1,
					value(figures(was[round][i]), j), value(figures(got[round][i]), j))
			}
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
