package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/latch-io/latch/client"
)

// cachedSet sets one node Ops times (Concurrency writers over Conns
// connections) while Cachers other connections cache it: before each set
// every cacher reads it again (untimed), so every set waits for Cachers
// invalidations to be acknowledged. Cachers 0 measures the same sets on a
// node nobody caches.
func (r *runner) cachedSet(rep *Report) error {
	key, err := r.createNode("key")
	if err != nil {
		return err
	}
	writers, err := r.dialPool(r.cfg.Conns, r.cfg.Conns)
	if err != nil {
		return err
	}
	defer writers.close(r.cfg.Conns)
	var cachers []*client.Client
	if r.cfg.Cachers > 0 {
		cp, err := r.dialPool(r.cfg.Cachers, min(r.cfg.Cachers, 64))
		if err != nil {
			return err
		}
		defer cp.close(min(r.cfg.Cachers, 64))
		cachers = cp.clients
		for _, c := range cachers {
			if err := r.warmCache(c, key); err != nil {
				return err
			}
		}
	}
	data := r.data()
	var mu sync.Mutex // one set at a time: each finds the node cached by every cacher
	lat := make([][]time.Duration, r.cfg.Concurrency)
	cpu := r.leaderCPU()
	done, elapsed, err := r.drive(r.cfg.Ops, r.cfg.Concurrency, func(ctx context.Context, w, i int) error {
		mu.Lock()
		defer mu.Unlock()
		if err := refill(ctx, cachers, key); err != nil {
			return err
		}
		start := time.Now()
		_, err := writers.get(w).Set(ctx, key, data)
		d := time.Since(start)
		if err != nil {
			return err
		}
		lat[w] = append(lat[w], d)
		return nil
	})
	if err != nil {
		return err
	}
	if cpu != nil { // the refills' reads included
		rep.LeaderCPUMillisPerOp = cpu(done)
	}
	// The elapsed time includes the refills: ops/s is not a write rate.
	finish(rep, done, elapsed, OpLatency{Op: "set", Latency: Summarize(merge(lat))})
	rep.Notes = append(rep.Notes, fmt.Sprintf("each set on a node cached by %d connections (they read it again before every set, untimed; ops/s counts those reads too)", len(cachers)))
	return nil
}

// refill has every cacher read key with Cached, so each caches it again.
func refill(ctx context.Context, cachers []*client.Client, key string) error {
	if len(cachers) == 0 {
		return nil
	}
	const parallel = 64
	sem := make(chan struct{}, parallel)
	errs := make([]error, len(cachers))
	var wg sync.WaitGroup
	for i, c := range cachers {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_, _, errs[i] = c.Get(ctx, key, client.Cached())
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// warmCache reads key with Cached until c answers it from its cache (the
// cache lease is granted after the first read).
func (r *runner) warmCache(c *client.Client, key string) error {
	ctx, cancel := r.opCtx()
	defer cancel()
	for {
		before := c.CacheStats().Hits
		if _, _, err := c.Get(ctx, key, client.Cached()); err != nil {
			return err
		}
		if c.CacheStats().Hits > before {
			return nil
		}
		t := time.NewTimer(time.Millisecond) // the lease grant is on its way
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s never answered from the cache: %w", key, ctx.Err())
		}
	}
}

func cacheTotals(cs []*client.Client) client.CacheStats {
	var t client.CacheStats
	for _, c := range cs {
		s := c.CacheStats()
		t.Hits, t.Misses = t.Hits+s.Hits, t.Misses+s.Misses
	}
	return t
}
