package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/latch-io/latch/client"
)

// get reads one node of DataSize bytes Ops times from Concurrency
// goroutines over Conns connections: linearizably (ScenarioGet), stale
// from each client's read member (ScenarioStaleGet), or from the client
// cache (ScenarioCachedGet, after a warm-up that waits until every
// connection answers from its cache: the latency of a read that needs no
// round trip).
func (r *runner) get(rep *Report, scenario string) error {
	key, err := r.createNode("key")
	if err != nil {
		return err
	}
	p, err := r.dialPool(r.cfg.Conns, r.cfg.Conns)
	if err != nil {
		return err
	}
	defer p.close(r.cfg.Conns)
	var opts []client.ReadOption
	switch scenario {
	case ScenarioStaleGet:
		opts = append(opts, client.Stale())
		// A stale read may be served before the member applied the
		// create; Sync makes the first one find the node.
		for _, c := range p.clients {
			ctx, cancel := r.opCtx()
			err := c.Sync(ctx)
			cancel()
			if err != nil {
				return err
			}
		}
	case ScenarioCachedGet:
		opts = append(opts, client.Cached())
		for _, c := range p.clients {
			if err := r.warmCache(c, key); err != nil {
				return err
			}
		}
	}
	before := cacheTotals(p.clients)
	cpu := r.leaderCPU()
	loads := r.memberLoads()
	lat := make([][]time.Duration, r.cfg.Concurrency)
	done, elapsed, err := r.drive(r.cfg.Ops, r.cfg.Concurrency, func(ctx context.Context, w, i int) error {
		c := p.get(w)
		start := time.Now()
		data, _, err := c.Get(ctx, key, opts...)
		d := time.Since(start)
		if err != nil {
			return err
		}
		if len(data) != r.cfg.DataSize {
			return fmt.Errorf("read %d bytes of %s, want %d", len(data), key, r.cfg.DataSize)
		}
		lat[w] = append(lat[w], d)
		return nil
	})
	if err != nil {
		return err
	}
	if cpu != nil {
		rep.LeaderCPUMillisPerOp = cpu(done)
	}
	if loads != nil {
		loads(rep)
	}
	finish(rep, done, elapsed, OpLatency{Op: scenario, Latency: Summarize(merge(lat))})
	switch scenario {
	case ScenarioStaleGet:
		rep.ReadMembers = map[string]int{}
		for _, c := range p.clients {
			rep.ReadMembers[c.ReadMember()]++
		}
		rep.Notes = append(rep.Notes, fmt.Sprintf("stale reads are served by each client's read member (\"\" is the leader), connections per member: %v", rep.ReadMembers))
	case ScenarioCachedGet:
		after := cacheTotals(p.clients)
		rep.Notes = append(rep.Notes, fmt.Sprintf("cache hits %d, misses %d (a miss is a read from the leader: the lease was renewed late, or the connection changed)",
			after.Hits-before.Hits, after.Misses-before.Misses))
	}
	return nil
}

// create creates Ops persistent nodes of DataSize bytes, each at a new
// path under Prefix/create.
func (r *runner) create(rep *Report) error {
	dir := r.path("create")
	ctx, cancel := r.opCtx()
	_, err := r.ctl.Create(ctx, dir, nil)
	cancel()
	if err != nil {
		return err
	}
	p, err := r.dialPool(r.cfg.Conns, r.cfg.Conns)
	if err != nil {
		return err
	}
	defer p.close(r.cfg.Conns)
	data := r.data()
	lat := make([][]time.Duration, r.cfg.Concurrency)
	done, elapsed, err := r.drive(r.cfg.Ops, r.cfg.Concurrency, func(ctx context.Context, w, i int) error {
		c := p.get(w)
		start := time.Now()
		_, err := c.Create(ctx, fmt.Sprintf("%s/n%d", dir, i), data)
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
	finish(rep, done, elapsed, OpLatency{Op: "create", Latency: Summarize(merge(lat))})
	return nil
}

// finish fills the report's common figures.
func finish(rep *Report, done int, elapsed time.Duration, lat ...OpLatency) {
	rep.Ops = done
	rep.Elapsed = Millis(elapsed)
	rep.OpsPerSec = rate(done, elapsed)
	rep.Latency = append(rep.Latency, lat...)
}

// merge concatenates per-worker samples.
func merge(per [][]time.Duration) []time.Duration {
	var n int
	for _, l := range per {
		n += len(l)
	}
	out := make([]time.Duration, 0, n)
	for _, l := range per {
		out = append(out, l...)
	}
	return out
}
