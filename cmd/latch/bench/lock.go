package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latch-io/latch/client"
)

// openSessions opens n sessions on p's clients (session i on client i mod
// conns), up to parallel at a time.
func (r *runner) openSessions(p *pool, n, parallel int) ([]*client.Session, error) {
	out := make([]*client.Session, n)
	errs := make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(parallel, n) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				ctx, cancel := r.opCtx()
				out[i], errs[i] = p.get(i).NewSession(ctx, 0)
				cancel()
			}
		})
	}
	wg.Wait()
	return out, firstError(errs)
}

// lock takes and releases a free lock Ops times. Each goroutine has its
// own session and its own lock path (Prefix/lock/gW), or a new path every
// cycle with FreshPath, so no two requests ever conflict.
func (r *runner) lock(rep *Report) error {
	p, err := r.dialPool(r.cfg.Conns, r.cfg.Conns)
	if err != nil {
		return err
	}
	defer p.close(r.cfg.Conns)
	sessions, err := r.openSessions(p, r.cfg.Concurrency, r.cfg.Concurrency)
	if err != nil {
		return err
	}
	mutexes := make([]*client.Mutex, r.cfg.Concurrency)
	for w, s := range sessions {
		mutexes[w] = client.NewMutex(s, r.path(fmt.Sprintf("lock/g%d", w)))
	}
	acq := make([][]time.Duration, r.cfg.Concurrency)
	rel := make([][]time.Duration, r.cfg.Concurrency)
	done, elapsed, err := r.drive(r.cfg.Ops, r.cfg.Concurrency, func(ctx context.Context, w, i int) error {
		m := mutexes[w]
		if r.cfg.FreshPath {
			m = client.NewMutex(sessions[w], r.path(fmt.Sprintf("lock/g%d-%d", w, i)))
		}
		start := time.Now()
		if err := m.Lock(ctx); err != nil {
			return err
		}
		locked := time.Now()
		// Release even when the measured phase just ended: a lock left
		// held would outlive the cycle.
		uctx, cancel := r.opCtx()
		err := m.Unlock(uctx)
		cancel()
		if err != nil {
			return err
		}
		acq[w] = append(acq[w], locked.Sub(start))
		rel[w] = append(rel[w], time.Since(locked))
		return nil
	})
	if err != nil {
		return err
	}
	finish(rep, done, elapsed,
		OpLatency{Op: "acquire", Latency: Summarize(merge(acq))},
		OpLatency{Op: "release", Latency: Summarize(merge(rel))})
	what := "one lock path per goroutine"
	if r.cfg.FreshPath {
		what = "a new lock path every cycle"
	}
	rep.Notes = append(rep.Notes, "uncontended: "+what+", each goroutine its own session; ops/s counts lock+unlock cycles")
	return nil
}

// contended runs Concurrency clients, each its own session, for Duration:
// client i takes and at once releases lock i mod Locks (or a random lock
// each cycle with RandomLock), again and again.
// The sessions share Conns connections. A cycle counts when its Lock
// returned within Duration; its Unlock always completes.
func (r *runner) contended(rep *Report) error {
	n, locks := r.cfg.Concurrency, r.cfg.Locks
	p, err := r.dialPool(r.cfg.Conns, r.cfg.Conns)
	if err != nil {
		return err
	}
	defer p.close(r.cfg.Conns)
	sessions, err := r.openSessions(p, n, min(n, DefaultOpeners))
	if err != nil {
		return err
	}
	r.logf("%d sessions on %d connections contend for %d locks for %v", n, r.cfg.Conns, locks, r.cfg.Duration)

	cpu := r.leaderCPU() // before the window, when asked for (cells)
	pings := r.leaderPings()
	tm := r.memberTerms()
	tctx, tcancel := r.opCtx()
	term0, termOK := tm.highest(tctx)
	tcancel()
	wctx, cancel := context.WithTimeout(r.mctx, r.cfg.Duration)
	defer cancel()
	acq := make([][]time.Duration, n)
	grants := make([]int, n)
	errs := make([]error, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i, s := range sessions {
		mutexes := make([]*client.Mutex, locks)
		for l := range mutexes {
			mutexes[l] = client.NewMutex(s, r.path(fmt.Sprintf("contended/l%d", l)))
		}
		rng := rand.New(rand.NewPCG(uint64(i), 0x1a7c4))
		wg.Go(func() {
			for wctx.Err() == nil {
				m := mutexes[i%locks]
				if r.cfg.RandomLock {
					m = mutexes[rng.IntN(locks)]
				}
				t0 := time.Now()
				err := m.Lock(wctx)
				d := time.Since(t0)
				if err != nil {
					if wctx.Err() == nil && !windowEnded(wctx, err) {
						errs[i] = fmt.Errorf("client %d: lock: %w", i, err)
						cancel()
					}
					return
				}
				uctx, ucancel := r.opCtx()
				err = m.Unlock(uctx)
				ucancel()
				if err != nil {
					errs[i] = fmt.Errorf("client %d: unlock: %w", i, err)
					cancel()
					return
				}
				acq[i] = append(acq[i], d)
				grants[i]++
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	tctx, tcancel = r.opCtx()
	term1, termOK1 := tm.highest(tctx)
	tcancel()
	if err := firstError(errs); err != nil {
		if termOK && termOK1 && term1 > term0 {
			return fmt.Errorf("%w (%d elections during the window: term %d to %d)", err, term1-term0, term0, term1)
		}
		return err
	}
	var total int
	for _, g := range grants {
		total += g
	}
	finish(rep, total, elapsed, OpLatency{Op: "acquire", Latency: Summarize(merge(acq))})
	c := &Contention{Clients: n, Locks: locks, RandomLock: r.cfg.RandomLock, MinGrants: slices.Min(grants), MaxGrants: slices.Max(grants)}
	if f, ok := Fairness(grants); ok {
		c.Fairness = &f
	}
	if cpu != nil {
		c.LeaderCPUMillisPerOp = cpu(total)
	}
	if pings != nil {
		c.LeaderPingsPerOp = pings(total)
	}
	if termOK && termOK1 {
		n := int(term1 - term0)
		c.Elections = &n
	}
	if r.cfg.Reference > 0 {
		g := 100 * rep.OpsPerSec / r.cfg.Reference
		c.GoodputPercent = &g
	}
	rep.Contention = c
	pick := fmt.Sprintf("client i takes lock i mod %d", locks)
	if r.cfg.RandomLock {
		pick = fmt.Sprintf("each client takes a random one of %d locks every cycle", locks)
	}
	rep.Notes = append(rep.Notes, pick+" and releases it at once; acquire latency includes the wait in the queue")
	return nil
}

// windowEnded reports whether a Lock failed because the window ended: the
// server withdraws a request at the deadline the client sent with it, so
// its ErrTimeout can arrive a moment before the client's own deadline.
func windowEnded(ctx context.Context, err error) bool {
	dl, ok := ctx.Deadline()
	return ok && errors.Is(err, client.ErrTimeout) && time.Until(dl) < 100*time.Millisecond
}
