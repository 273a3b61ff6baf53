package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/latch-io/latch/client"
)

// CellsReport is a contended run over several cells at once: one Report
// per cell (each cell's clients contend for locks of that cell only) and
// the aggregate.
type CellsReport struct {
	Cells map[string]*Report `json:"cells"`
	// OpsPerSec is the sum of the cells' cycles per second (their windows
	// run at the same time).
	OpsPerSec float64 `json:"ops_per_sec"`
	// MaxP99 is the highest of the cells' acquire p99s: the p99 of the
	// merged samples is at most that.
	MaxP99 Millis `json:"max_p99_ms"`
}

// leaderCPU starts measuring the leader's CPU when cfg.LeaderCPU: it
// returns the function that ends the measurement and gives the CPU
// milliseconds per op, or nil when not asked for (or the leader cannot be
// scraped: then the figure is missing, the run goes on).
func (r *runner) leaderCPU() func(ops int) *float64 {
	return r.leaderPerOp("leader CPU", func(ctx context.Context, sc *scraper) (float64, error) {
		smp, err := sc.sample(ctx)
		return smp.cpuSeconds * 1000, err
	})
}

// leaderPings is leaderCPU for the liveness pings the leader echoed
// (per operation).
func (r *runner) leaderPings() func(ops int) *float64 {
	return r.leaderPerOp("leader pings", func(ctx context.Context, sc *scraper) (float64, error) {
		n, err := sc.counter(ctx, "latch_liveness_pings_total")
		return float64(n), err
	})
}

// leaderPerOp reads a figure of the leader (what, by read) now and
// returns the func that reads it again and gives the growth per
// operation; nil unless LeaderCPU. The func gives nil when the leader
// changed or could not be read.
func (r *runner) leaderPerOp(what string, read func(context.Context, *scraper) (float64, error)) func(ops int) *float64 {
	if !r.cfg.LeaderCPU {
		return nil
	}
	ctx, cancel := r.opCtx()
	defer cancel()
	members, err := r.ctl.Members(ctx)
	if err != nil {
		r.logf("%s not measured: %v", what, err)
		return nil
	}
	id, addr, err := leaderAdmin(members)
	if err != nil {
		r.logf("%s not measured: %v", what, err)
		return nil
	}
	sc := newScraper(addr, r.cfg.OpTimeout, r.cfg.Client.TLS)
	st0, err0 := sc.status(ctx)
	before, err1 := read(ctx, sc)
	if err0 != nil || err1 != nil || st0.ID != id {
		r.logf("%s not measured: %v %v", what, err0, err1)
		return nil
	}
	return func(ops int) *float64 {
		ctx, cancel := r.opCtx()
		defer cancel()
		after, err := read(ctx, sc)
		st1, serr := sc.status(ctx)
		if err != nil || serr != nil || ops == 0 || st1.Term != st0.Term || st1.State != "Leader" {
			r.logf("%s not measured: leader changed or unreachable (%v %v)", what, err, serr)
			return nil
		}
		v := (after - before) / float64(ops)
		return &v
	}
}

// RunCells runs the contended scenario in every cell of m at once: the
// run in cell NAME works under /NAME/latch-bench-<random> with the cell's
// endpoints (cfg.Client's other fields apply to all), and measures that
// cell's leader CPU per cycle.
func RunCells(ctx context.Context, cfg Config, m client.CellMap) (*CellsReport, error) {
	if cfg.Scenario != ScenarioContended {
		return nil, fmt.Errorf("%w: only %s runs over cells", ErrBadConfig, ScenarioContended)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	suffix := "latch-bench-" + hex.EncodeToString(b[:])
	names := slices.Sorted(maps.Keys(m))
	reps := make([]*Report, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		c := cfg
		c.Client.Endpoints = slices.Clone(m[name])
		c.Prefix = "/" + name + "/" + suffix
		c.LeaderCPU = true
		wg.Go(func() {
			reps[i], errs[i] = Run(ctx, c)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("cell %s: %w", name, errs[i])
			}
		})
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		return nil, err
	}
	out := &CellsReport{Cells: map[string]*Report{}}
	for i, name := range names {
		out.Cells[name] = reps[i]
		out.OpsPerSec += reps[i].OpsPerSec
		for _, l := range reps[i].Latency {
			out.MaxP99 = max(out.MaxP99, l.P99)
		}
	}
	return out, nil
}

// WriteTable writes the aggregate, then each cell's report.
func (r *CellsReport) WriteTable(w io.Writer) {
	names := slices.Sorted(maps.Keys(r.Cells))
	fmt.Fprintf(w, "cells       %d (%s)\n", len(names), strings.Join(names, ", "))
	fmt.Fprintf(w, "aggregate   %s acquire+release/s\n", num(r.OpsPerSec))
	fmt.Fprintf(w, "max p99     %s (acquire, the highest cell's)\n", r.MaxP99)
	for _, name := range names {
		fmt.Fprintf(w, "\n== cell %s\n", name)
		r.Cells[name].WriteTable(w)
	}
}
