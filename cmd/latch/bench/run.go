package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latch-io/latch/client"
)

// Run runs cfg's scenario against the cluster cfg.Client names and
// returns its report. It returns when the scenario is done, MaxTime
// passed or ctx ended (then with the figures so far, Truncated set), and
// it leaves nothing behind: every session it opened is closed and, unless
// Keep, Prefix is deleted.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if cfg.Prefix == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		cfg.Prefix = "/latch-bench-" + hex.EncodeToString(b[:])
	}
	// setup and teardown run on a context that survives the measured
	// phase's end (MaxTime, ^C), so a truncated run still cleans up.
	base := context.WithoutCancel(ctx)
	mctx, cancel := context.WithTimeout(ctx, cfg.MaxTime)
	defer cancel()

	r := &runner{cfg: cfg, mctx: mctx, base: base}
	dctx, dcancel := r.opCtx()
	ctl, err := client.Dial(dctx, cfg.Client)
	dcancel()
	if err != nil {
		return nil, err
	}
	r.ctl = ctl
	defer ctl.Close()
	if err := r.resolveReadFrom(); err != nil {
		return nil, err
	}
	if err := r.createPrefix(); err != nil {
		return nil, err
	}
	defer r.cleanup()
	rep := &Report{Scenario: cfg.Scenario, Concurrency: cfg.Concurrency, Conns: cfg.Conns}
	switch cfg.Scenario {
	case ScenarioGet, ScenarioStaleGet, ScenarioCachedGet:
		err = r.get(rep, cfg.Scenario)
	case ScenarioCachedSet:
		err = r.cachedSet(rep)
	case ScenarioCreate:
		err = r.create(rep)
	case ScenarioSet:
		err = r.set(rep)
	case ScenarioWatch:
		err = r.watch(rep)
	case ScenarioLock:
		err = r.lock(rep)
	case ScenarioContended:
		err = r.contended(rep)
	case ScenarioSessions:
		err = r.sessions(rep)
	case ScenarioStorm:
		err = r.storm(rep)
	}
	if err != nil {
		return nil, fmt.Errorf("latch: bench %s: %w", cfg.Scenario, err)
	}
	if mctx.Err() != nil {
		rep.Truncated = true
	}
	return rep, nil
}

// runner is one run: the config, the control client (set-up, clean-up,
// leader discovery; never measured) and the contexts.
type runner struct {
	cfg  Config
	ctl  *client.Client
	mctx context.Context // the measured phase: ends at MaxTime or ^C
	base context.Context // set-up and clean-up: not cancelled with mctx
	// readOver are the client addresses ReadFollowers and ReadLearners
	// spread the connections' stale reads over (resolveReadFrom).
	readOver []string
}

// opCtx bounds one set-up or clean-up step by OpTimeout.
func (r *runner) opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.base, r.cfg.OpTimeout)
}

func (r *runner) logf(format string, a ...any) {
	fmt.Fprintf(r.cfg.Log, "bench: "+format+"\n", a...)
}

func (r *runner) path(name string) string { return r.cfg.Prefix + "/" + name }

func (r *runner) data() []byte { return make([]byte, r.cfg.DataSize) }

func (r *runner) createPrefix() error {
	ctx, cancel := r.opCtx()
	defer cancel()
	if _, err := r.ctl.Create(ctx, r.cfg.Prefix, nil); err != nil {
		return fmt.Errorf("latch: bench: create %s: %w", r.cfg.Prefix, err)
	}
	r.logf("nodes under %s", r.cfg.Prefix)
	return nil
}

// multiBatch is how many deletes one clean-up Multi carries: the server's
// default limit of ops per multi.
const multiBatch = 128

// cleanup deletes Prefix and everything under it, unless Keep. Leaves are
// deleted 128 to a Multi, several Multis at once, so clean-up costs a
// fraction of the run; a child that has children of its own goes through
// the client's recursive delete.
func (r *runner) cleanup() {
	if r.cfg.Keep {
		r.logf("kept %s", r.cfg.Prefix)
		return
	}
	ctx, cancel := context.WithTimeout(r.base, 4*r.cfg.OpTimeout+time.Duration(r.cfg.Ops)*time.Millisecond)
	defer cancel()
	if err := r.deleteTree(ctx, r.cfg.Prefix); err != nil {
		r.logf("clean-up of %s failed, delete it by hand (latch delete -r %s): %v", r.cfg.Prefix, r.cfg.Prefix, err)
	}
}

func (r *runner) deleteTree(ctx context.Context, p string) error {
	names, err := r.ctl.Children(ctx, p)
	if err != nil {
		return err
	}
	var batches [][]string
	for len(names) > 0 {
		n := min(multiBatch, len(names))
		batches = append(batches, names[:n])
		names = names[n:]
	}
	errs := make([]error, len(batches))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(8, len(batches)) {
		wg.Go(func() {
			for b := int(next.Add(1)) - 1; b < len(batches); b = int(next.Add(1)) - 1 {
				ops := make([]client.Op, len(batches[b]))
				for i, name := range batches[b] {
					ops[i] = client.OpDelete(p + "/" + name)
				}
				if _, err := r.ctl.Multi(ctx, ops...); err == nil || !errors.Is(err, client.ErrNotEmpty) {
					errs[b] = err
					continue
				}
				for _, name := range batches[b] {
					if err := r.ctl.Delete(ctx, p+"/"+name, client.Recursive()); err != nil && !errors.Is(err, client.ErrNoNode) {
						errs[b] = err
						break
					}
				}
			}
		})
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		return err
	}
	return r.ctl.Delete(ctx, p)
}

// drive runs n operations, op(ctx, worker, i) for i in [0, n), from
// workers goroutines, each bounding its op by OpTimeout. It stops early,
// without an error, when the measured phase ends, and at the first
// failing op, returning that op's error. done counts the ops that
// succeeded.
func (r *runner) drive(n, workers int, op func(ctx context.Context, w, i int) error) (done int, elapsed time.Duration, err error) {
	ctx, cancel := context.WithCancel(r.mctx)
	defer cancel()
	var (
		next, ok atomic.Int64
		errOnce  sync.Once
		first    error
		wg       sync.WaitGroup
	)
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n && ctx.Err() == nil; i = int(next.Add(1)) - 1 {
				octx, ocancel := context.WithTimeout(ctx, r.cfg.OpTimeout)
				err := op(octx, w, i)
				ocancel()
				if err == nil {
					ok.Add(1)
					continue
				}
				if r.mctx.Err() == nil { // else the run was cut short: not a failure
					errOnce.Do(func() { first = fmt.Errorf("op %d: %w", i, err); cancel() })
				}
				return
			}
		})
	}
	wg.Wait()
	return int(ok.Load()), time.Since(start), first
}

// pool is the clients (connections) a scenario spreads its work over.
type pool struct{ clients []*client.Client }

// dialPool dials n clients, up to parallel at a time.
func (r *runner) dialPool(n, parallel int) (*pool, error) {
	p := &pool{clients: make([]*client.Client, n)}
	errs := make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(parallel, n) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				ctx, cancel := r.opCtx()
				p.clients[i], errs[i] = client.Dial(ctx, r.connConfig(i))
				cancel()
			}
		})
	}
	wg.Wait()
	if err := firstError(errs); err != nil {
		p.close(parallel)
		return nil, err
	}
	return p, nil
}

// connConfig is the client config of the pool's connection i: Client
// with its reads routed by ReadFrom.
func (r *runner) connConfig(i int) client.Config {
	cfg := r.cfg.Client
	spread := func(eps []string) []string { return append(slices.Clone(eps[i%len(eps):]), eps[:i%len(eps)]...) }
	switch r.cfg.ReadFrom {
	case ReadSpread:
		cfg.ReadEndpoints = spread(cfg.Endpoints)
	case ReadFollowers, ReadLearners:
		cfg.ReadEndpoints = spread(r.readOver)
	case ReadNearest:
		cfg.ReadEndpoints = nil
	case ReadLeader:
		cfg.LeaderReads = true
	}
	return cfg
}

// resolveReadFrom finds, for ReadFollowers and ReadLearners, the client
// addresses of the members that are not the leader (followers: learners
// too) or are learners, in the order of their ids, from the member list.
func (r *runner) resolveReadFrom() error {
	if r.cfg.ReadFrom != ReadFollowers && r.cfg.ReadFrom != ReadLearners {
		return nil
	}
	ctx, cancel := r.opCtx()
	defer cancel()
	members, err := r.ctl.Members(ctx)
	if err != nil {
		return err
	}
	slices.SortFunc(members, func(a, b client.MemberInfo) int { return strings.Compare(a.ID, b.ID) })
	for _, m := range members {
		if m.Leader || (r.cfg.ReadFrom == ReadLearners && m.Voter) {
			continue
		}
		if m.ClientAddr == "" {
			r.logf("member %s lists no client address: no reads go to it", m.ID)
			continue
		}
		addr, err := memberClientAddr(m, r.cfg.Client.Endpoints)
		if err != nil {
			return err
		}
		r.readOver = append(r.readOver, addr)
	}
	if len(r.readOver) == 0 {
		return fmt.Errorf("%w: ReadFrom %s: the member list names no %s with a client address (members: %v)", ErrBadConfig, r.cfg.ReadFrom, r.cfg.ReadFrom, members)
	}
	if !r.cfg.AllowRemote {
		for _, a := range r.readOver {
			if err := checkLoopback(a); err != nil {
				return err
			}
		}
	}
	r.logf("stale reads spread over %v", r.readOver)
	return nil
}

func (p *pool) get(i int) *client.Client { return p.clients[i%len(p.clients)] }

// close closes every client (and so every session it keeps), up to
// parallel at a time.
func (p *pool) close(parallel int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(max(parallel, 1), len(p.clients)) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(p.clients); i = int(next.Add(1)) - 1 {
				if c := p.clients[i]; c != nil {
					c.Close()
				}
			}
		})
	}
	wg.Wait()
}

// firstError returns the first non-nil error of errs, saying how many
// more there were: when thousands of opens fail for one reason, one line
// names it.
func firstError(errs []error) error {
	var first error
	n := 0
	for _, err := range errs {
		if err == nil {
			continue
		}
		if first == nil {
			first = err
		}
		n++
	}
	if n > 1 {
		return fmt.Errorf("%w (and %d more failures)", first, n-1)
	}
	return first
}
