package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/latch-io/latch/client"
)

// set replaces the data of a node Ops times; each goroutine has its own
// node (Prefix/set/gW), so every set is one commit and ops/s is commits
// per second.
func (r *runner) set(rep *Report) error {
	p, err := r.dialPool(r.cfg.Conns, r.cfg.Conns)
	if err != nil {
		return err
	}
	defer p.close(r.cfg.Conns)
	paths := make([]string, r.cfg.Concurrency)
	for w := range paths {
		paths[w] = r.path(fmt.Sprintf("set-g%d", w))
		ctx, cancel := r.opCtx()
		_, err := r.ctl.Create(ctx, paths[w], r.data())
		cancel()
		if err != nil {
			return err
		}
	}
	data := r.data()
	lat := make([][]time.Duration, r.cfg.Concurrency)
	cpu := r.leaderCPU() // when asked for
	done, elapsed, err := r.drive(r.cfg.Ops, r.cfg.Concurrency, func(ctx context.Context, w, i int) error {
		start := time.Now()
		if _, err := p.get(w).Set(ctx, paths[w], data); err != nil {
			return err
		}
		lat[w] = append(lat[w], time.Since(start))
		return nil
	})
	if err != nil {
		return err
	}
	finish(rep, done, elapsed, OpLatency{Op: "set", Latency: Summarize(merge(lat))})
	if cpu != nil {
		rep.LeaderCPUMillisPerOp = cpu(done)
	}
	rep.Notes = append(rep.Notes, "each goroutine sets its own node: one commit per set, ops/s is commits/s")
	return nil
}

// seen is a watch event and when this process received it.
type seen struct {
	rev uint64
	at  time.Time
}

// watch sets one node Ops times, one at a time, on one connection while a
// data watch on it runs on another: "put → event" is from just before the
// Set call to the moment the watcher's event for that revision arrives.
func (r *runner) watch(rep *Report) error {
	key, err := r.createNode("watched")
	if err != nil {
		return err
	}
	p, err := r.dialPool(2, 2)
	if err != nil {
		return err
	}
	defer p.close(2)
	writer, watcher := p.get(0), p.get(1)
	wctx, wcancel := context.WithCancel(r.mctx)
	defer wcancel()
	wt, err := watcher.Watch(wctx, key, client.Data())
	if err != nil {
		return err
	}
	defer wt.Close()
	// Stamp events as they arrive, not when the loop below gets to them:
	// an event may land while the writer still waits for its Set.
	arrivals := make(chan seen, 64)
	go func() {
		defer close(arrivals)
		for ev := range wt.Events() {
			arrivals <- seen{ev.Revision, time.Now()}
		}
	}()
	data := r.data()
	var setLat, evLat []time.Duration
	done, elapsed, err := r.drive(r.cfg.Ops, 1, func(ctx context.Context, _, _ int) error {
		start := time.Now()
		st, err := writer.Set(ctx, key, data)
		if err != nil {
			return err
		}
		setLat = append(setLat, time.Since(start))
		for {
			select {
			case a, ok := <-arrivals:
				if !ok {
					return fmt.Errorf("watch on %s ended: %w", key, wt.Err())
				}
				if a.rev < st.ModRev {
					continue // a late event of an earlier set
				}
				if a.rev > st.ModRev {
					return fmt.Errorf("watch skipped revision %d (got %d)", st.ModRev, a.rev)
				}
				evLat = append(evLat, a.at.Sub(start))
				return nil
			case <-ctx.Done():
				return fmt.Errorf("no watch event for revision %d: %w", st.ModRev, ctx.Err())
			}
		}
	})
	if err != nil {
		return err
	}
	finish(rep, done, elapsed,
		OpLatency{Op: "set", Latency: Summarize(setLat)},
		OpLatency{Op: "put→event", Latency: Summarize(evLat)})
	rep.Notes = append(rep.Notes, "one writer and one watcher on two connections; put→event is from the start of Set to the watcher receiving that revision")
	return nil
}

// createNode creates the run's node name with DataSize bytes of data and
// returns its path.
func (r *runner) createNode(name string) (string, error) {
	key := r.path(name)
	ctx, cancel := r.opCtx()
	defer cancel()
	_, err := r.ctl.Create(ctx, key, r.data())
	return key, err
}
