package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// ScenarioFailover: real latchd processes started by the run; the leader
// is killed (or stopped) while a holder and queued waiters use one lock.
const ScenarioFailover = "failover"

// Defaults of FailoverConfig.
const (
	DefaultFailoverMembers = 3
	DefaultFailoverRounds  = 10
	DefaultFailoverWaiters = 8
)

// FailoverConfig configures `latch bench failover`: it starts Members
// latchd processes on loopback itself (data under Dir), and for each of
// Rounds: one client holds a lock with Waiters more clients queued behind
// it (one QUIC connection each), the leader gets Signal, the holder
// releases at once, and each waiter, once granted, releases too. Then the
// member is restarted (SIGKILL) or continued (SIGSTOP) and the cluster
// settles before the next round.
type FailoverConfig struct {
	Members, Rounds, Waiters int
	// Signal is syscall.SIGKILL (default) or syscall.SIGSTOP.
	Signal syscall.Signal
	// Partition cuts the leader's raft traffic to every other member
	// (latchd --fault-injection, POST /v1/faults) instead of signalling
	// it; clients still reach it. The cut heals after the round.
	Partition bool
	// LatchdBin is the latchd to run; "" builds ./cmd/latchd into Dir.
	LatchdBin string
	// Dir holds the members' data and logs; "" is a new temporary
	// directory, removed afterwards.
	Dir string
	// Args are extra latchd flags for every member (e.g. raft timing).
	Args []string
	// OpTimeout bounds every client call (default DefaultOpTimeout).
	OpTimeout time.Duration
	// Log receives progress lines. Default: discard.
	Log io.Writer
}

// FailoverRound is what one round measured, each from the signal.
type FailoverRound struct {
	Killed    string `json:"killed"`
	NewLeader string `json:"new_leader"`
	// Elected: a member other than the killed one reports itself the
	// ready leader. Reconnected: every client is connected to it.
	// FirstGrant: the first waiter holds the lock. AllGranted: the last
	// waiter holds it (every waiter releases as soon as it is granted).
	Elected     Millis `json:"elected_ms"`
	Reconnected Millis `json:"reconnected_ms"`
	FirstGrant  Millis `json:"first_grant_ms"`
	AllGranted  Millis `json:"all_granted_ms"`
}

// FailoverReport is the result of RunFailover.
type FailoverReport struct {
	Scenario string          `json:"scenario"`
	Members  int             `json:"members"`
	Waiters  int             `json:"waiters"`
	Signal   string          `json:"signal"`
	Rounds   []FailoverRound `json:"rounds"`
	// Summaries over the rounds (P50 is the median, Max the worst).
	Elected     Latency `json:"elected"`
	Reconnected Latency `json:"reconnected"`
	FirstGrant  Latency `json:"first_grant"`
	AllGranted  Latency `json:"all_granted"`
	Truncated   bool    `json:"truncated,omitempty"`
}

func (c FailoverConfig) withDefaults() FailoverConfig {
	if c.Members == 0 {
		c.Members = DefaultFailoverMembers
	}
	if c.Rounds == 0 {
		c.Rounds = DefaultFailoverRounds
	}
	if c.Waiters == 0 {
		c.Waiters = DefaultFailoverWaiters
	}
	if c.Signal == 0 {
		c.Signal = syscall.SIGKILL
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = DefaultOpTimeout
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return c
}

// Validate rejects a config that cannot run, naming the field.
func (c FailoverConfig) Validate() error {
	switch {
	case c.Members != 0 && c.Members < 3:
		return fmt.Errorf("%w: members %d: a failover needs at least 3", ErrBadConfig, c.Members)
	case c.Rounds < 0:
		return fmt.Errorf("%w: rounds %d is negative", ErrBadConfig, c.Rounds)
	case c.Waiters < 0:
		return fmt.Errorf("%w: waiters %d is negative", ErrBadConfig, c.Waiters)
	case c.Signal != 0 && c.Signal != syscall.SIGKILL && c.Signal != syscall.SIGSTOP:
		return fmt.Errorf("%w: signal %v: want SIGKILL or SIGSTOP", ErrBadConfig, c.Signal)
	}
	return nil
}

// failoverRun is one RunFailover: the members and the clients.
type failoverRun struct {
	cfg     FailoverConfig
	c       *proc.Cluster
	clients []*client.Client // 0: the holder; 1..Waiters: the waiters
	path    string
	cut     bool // a member is cut off by Partition, until recover
}

// RunFailover runs the failover scenario and returns its report. It stops
// every process it started before returning. A round in which a call
// failed, a waiter was granted out of order or twice, a token did not
// increase or a session ended fails the run.
func RunFailover(ctx context.Context, cfg FailoverConfig) (*FailoverReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	logger := slog.New(slog.DiscardHandler)
	if cfg.Dir != "" {
		// A kept directory also gets the clients' debug log.
		if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
			return nil, err
		}
		f, err := os.Create(filepath.Join(cfg.Dir, "clients.log"))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		logger = slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "latch-bench-failover-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		cfg.Dir = dir
	}
	bin := cfg.LatchdBin
	if bin == "" {
		bin = filepath.Join(cfg.Dir, "bin", "latchd")
		fmt.Fprintf(cfg.Log, "building ./cmd/latchd\n")
		if err := proc.GoBuild("./cmd/latchd", bin); err != nil {
			return nil, fmt.Errorf("%v (or pass --latchd-bin)", err)
		}
	}
	certs, err := session.EnsureDevCerts(filepath.Join(cfg.Dir, "tls"))
	if err != nil {
		return nil, err
	}
	r := &failoverRun{cfg: cfg, path: "/bench-failover/lock"}
	defer r.stop()
	args := cfg.Args
	if cfg.Partition {
		args = append(args[:len(args):len(args)], "--fault-injection")
	}
	if r.c, err = proc.LaunchCluster(cfg.Members, bin, cfg.Dir, certs, args...); err != nil {
		return nil, err
	}
	tlsConf, err := session.ClientTLS(certs.CA, "", "")
	if err != nil {
		return nil, err
	}
	eps := r.c.ClientAddrs()
	for range cfg.Waiters + 1 {
		dctx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
		c, err := client.Dial(dctx, client.Config{Endpoints: eps, TLS: tlsConf, ClientName: "latch-bench-failover",
			Logger: logger.With("client", len(r.clients))})
		cancel()
		if err != nil {
			return nil, err
		}
		r.clients = append(r.clients, c)
	}
	octx, cancel := context.WithTimeout(ctx, cfg.OpTimeout)
	_, err = r.clients[0].Create(octx, "/bench-failover", nil)
	cancel()
	if err != nil && !errors.Is(err, client.ErrNodeExists) {
		return nil, err
	}

	rep := &FailoverReport{Scenario: ScenarioFailover, Members: cfg.Members, Waiters: cfg.Waiters, Signal: cfg.fault()}
	for i := range cfg.Rounds {
		if ctx.Err() != nil {
			rep.Truncated = true
			break
		}
		rd, err := r.round(ctx)
		if err != nil {
			return nil, fmt.Errorf("latch: bench failover: round %d: %w", i+1, err)
		}
		fmt.Fprintf(cfg.Log, "round %d: %s killed, %s elected %v, reconnected %v, first grant %v, all granted %v\n",
			i+1, rd.Killed, rd.NewLeader, rd.Elected, rd.Reconnected, rd.FirstGrant, rd.AllGranted)
		rep.Rounds = append(rep.Rounds, rd)
		if err := r.recover(); err != nil {
			return nil, fmt.Errorf("latch: bench failover: recovering after round %d: %w", i+1, err)
		}
	}
	var el, rc, fg, ag []time.Duration
	for _, rd := range rep.Rounds {
		el = append(el, time.Duration(rd.Elected))
		rc = append(rc, time.Duration(rd.Reconnected))
		fg = append(fg, time.Duration(rd.FirstGrant))
		ag = append(ag, time.Duration(rd.AllGranted))
	}
	rep.Elected, rep.Reconnected, rep.FirstGrant, rep.AllGranted = Summarize(el), Summarize(rc), Summarize(fg), Summarize(ag)
	return rep, nil
}

func (c FailoverConfig) fault() string {
	if c.Partition {
		return "partition"
	}
	return signalName(c.Signal)
}

func signalName(s syscall.Signal) string {
	if s == syscall.SIGSTOP {
		return "SIGSTOP"
	}
	return "SIGKILL"
}

// stop closes the clients and stops every member.
func (r *failoverRun) stop() {
	for _, c := range r.clients {
		c.Close()
	}
	if r.c != nil {
		r.c.Shutdown()
	}
}

// settled waits until every member runs, is ready and follows one ready
// leader, and returns the leader's index.
func (r *failoverRun) settled() (int, error) { return r.c.AwaitLeader(proc.Settled, 30*time.Second) }

// grant is one waiter's grant.
type grant struct {
	waiter int
	token  uint64
	at     time.Time
	err    error
}

// round runs one failover and checks what the clients saw.
func (r *failoverRun) round(ctx context.Context) (FailoverRound, error) {
	var rd FailoverRound
	li, err := r.settled()
	if err != nil {
		return rd, err
	}
	old := r.c.Nodes[li]
	rd.Killed = old.ID
	opCtx := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, r.cfg.OpTimeout) }

	hctx, hcancel := opCtx()
	holder := client.NewMutex(r.clients[0].Session(), r.path)
	err = holder.Lock(hctx)
	hcancel()
	if err != nil {
		return rd, fmt.Errorf("holder lock: %w", err)
	}
	// Queue the waiters one at a time so their order is known.
	grants := make(chan grant, r.cfg.Waiters)
	var wg sync.WaitGroup
	defer wg.Wait()
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	for w := 1; w <= r.cfg.Waiters; w++ {
		m := client.NewMutex(r.clients[w].Session(), r.path)
		wg.Go(func() {
			// Each waiter's Lock and Unlock is one call with OpTimeout,
			// started before the failover: the wait includes it.
			lctx, cancel := context.WithTimeout(wctx, 2*r.cfg.OpTimeout)
			defer cancel()
			err := m.Lock(lctx)
			g := grant{waiter: w, token: m.Token(), at: time.Now(), err: err}
			if err == nil {
				uctx, ucancel := context.WithTimeout(wctx, r.cfg.OpTimeout)
				if uerr := m.Unlock(uctx); uerr != nil {
					g.err = fmt.Errorf("unlock: %w", uerr)
				}
				ucancel()
			}
			grants <- g
		})
		if err := r.waitQueue(ctx, w+1); err != nil {
			return rd, err
		}
	}
	if li, err = r.waitConnected(ctx); err != nil {
		return rd, err
	}
	old = r.c.Nodes[li]
	rd.Killed = old.ID
	token0 := holder.Token()

	// The failover.
	t0 := time.Now()
	if err := r.fail(li); err != nil {
		return rd, err
	}
	unlocked := make(chan error, 1)
	go func() {
		uctx, cancel := opCtx()
		defer cancel()
		unlocked <- holder.Unlock(uctx)
	}()
	elected := make(chan struct{})
	var newLeader string
	go func() {
		defer close(elected)
		deadline := t0.Add(r.cfg.OpTimeout)
		for time.Now().Before(deadline) {
			if i, err := r.c.Leader(proc.Claimed); err == nil && r.c.Nodes[i] != old {
				rd.Elected = Millis(time.Since(t0))
				newLeader = r.c.Nodes[i].ID
				return
			}
			time.Sleep(2 * time.Millisecond) // polling a condition with a deadline
		}
	}()
	reconnected := make(chan struct{})
	go func() {
		defer close(reconnected)
		deadline := t0.Add(r.cfg.OpTimeout)
		for time.Now().Before(deadline) {
			all := true
			for _, c := range r.clients {
				if m := c.Member(); m == "" || m == old.ID {
					all = false
					break
				}
			}
			if all {
				rd.Reconnected = Millis(time.Since(t0))
				return
			}
			time.Sleep(time.Millisecond) // polling a condition with a deadline
		}
	}()

	// Grants arrive here after each waiter's Unlock, in any order; FIFO
	// means the tokens increase in queue order.
	got := make([]grant, r.cfg.Waiters+1)
	for range r.cfg.Waiters {
		select {
		case g := <-grants:
			if g.err != nil {
				return rd, fmt.Errorf("waiter %d: %w", g.waiter, g.err)
			}
			got[g.waiter] = g
		case <-time.After(3 * r.cfg.OpTimeout):
			return rd, errors.New("waiters not all granted")
		}
	}
	var first, last time.Time
	prevToken := token0
	for w := 1; w <= r.cfg.Waiters; w++ {
		g := got[w]
		if g.token <= prevToken {
			return rd, fmt.Errorf("waiter %d (queued %d-th) has token %d, not above %d: not granted in FIFO order", w, w, g.token, prevToken)
		}
		prevToken = g.token
		if first.IsZero() || g.at.Before(first) {
			first = g.at
		}
		if g.at.After(last) {
			last = g.at
		}
	}
	if err := <-unlocked; err != nil {
		return rd, fmt.Errorf("holder unlock: %w", err)
	}
	<-elected
	<-reconnected
	rd.NewLeader = newLeader
	rd.FirstGrant, rd.AllGranted = Millis(first.Sub(t0)), Millis(last.Sub(t0))
	// No session ended: not as the clients see it, nor on the new leader.
	sctx, scancel := opCtx()
	list, err := r.clients[0].Sessions(sctx)
	scancel()
	if err != nil {
		return rd, fmt.Errorf("sessions: %w", err)
	}
	live := map[uint64]bool{}
	for _, si := range list {
		live[si.ID] = true
	}
	for i, c := range r.clients {
		if err := c.Session().Err(); err != nil {
			return rd, fmt.Errorf("client %d session: %w", i, err)
		}
		if !live[c.Session().ID()] {
			return rd, fmt.Errorf("client %d session %d is gone on the new leader", i, c.Session().ID())
		}
	}
	return rd, nil
}

// waitQueue waits until the lock's queue holds n requests.
func (r *failoverRun) waitQueue(ctx context.Context, n int) error {
	deadline := time.Now().Add(r.cfg.OpTimeout)
	for {
		qctx, cancel := context.WithTimeout(ctx, r.cfg.OpTimeout)
		q, err := r.clients[0].LockQueue(qctx, r.path)
		cancel()
		if err == nil && len(q) == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lock queue: want %d requests, have %d (%v)", n, len(q), err)
		}
		time.Sleep(2 * time.Millisecond) // polling a condition with a deadline
	}
}

// waitConnected waits until every client is connected to the settled
// cluster's leader (which may change meanwhile) and returns its index.
func (r *failoverRun) waitConnected(ctx context.Context) (int, error) {
	deadline := time.Now().Add(r.cfg.OpTimeout)
	var where []string
	for {
		li, err := r.c.Leader(proc.Settled)
		if err == nil {
			where = where[:0]
			all := true
			for _, c := range r.clients {
				m := c.Member()
				where = append(where, m)
				all = all && m == r.c.Nodes[li].ID
			}
			if all {
				return li, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return -1, fmt.Errorf("clients not all connected to the leader (%v; clients on %q)", err, where)
		}
		time.Sleep(2 * time.Millisecond) // polling a condition with a deadline
	}
}

// fail signals member i, or cuts it off from the others' raft traffic
// (both ways).
func (r *failoverRun) fail(i int) error {
	if !r.cfg.Partition {
		return r.c.Nodes[i].Signal(r.cfg.Signal)
	}
	var others []int
	for j := range r.c.Nodes {
		if j != i {
			others = append(others, j)
		}
	}
	r.cut = true
	return r.c.Partition(others, []int{i})
}

// recover restarts (SIGKILL) or continues (SIGSTOP) the members that are
// down, heals a partition, and waits for the cluster to settle.
func (r *failoverRun) recover() error {
	if r.cut {
		if err := r.c.Heal(); err != nil {
			return err
		}
		r.cut = false
	}
	for i, nd := range r.c.Nodes {
		switch {
		case nd.Paused():
			if err := nd.Signal(syscall.SIGCONT); err != nil {
				return err
			}
		case !nd.Running():
			if err := r.c.Relaunch(i); err != nil {
				return err
			}
		}
	}
	_, err := r.settled()
	return err
}

// WriteTable writes the report as aligned tables: one row per round, then
// the median and worst of each link of the chain.
func (r *FailoverReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "failover: %d members, %s of the leader, holder + %d waiters, %d rounds\n\n",
		r.Members, r.Signal, r.Waiters, len(r.Rounds))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ROUND\tKILLED\tNEW LEADER\tELECTED\tRECONNECTED\tFIRST GRANT\tALL GRANTED")
	for i, rd := range r.Rounds {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", i+1, rd.Killed, rd.NewLeader,
			dur(rd.Elected), dur(rd.Reconnected), dur(rd.FirstGrant), dur(rd.AllGranted))
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FROM THE SIGNAL TO\tMEDIAN\tWORST")
	for _, l := range []struct {
		what string
		l    Latency
	}{{"new leader elected", r.Elected}, {"clients reconnected", r.Reconnected}, {"first grant", r.FirstGrant}, {"all waiters granted", r.AllGranted}} {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", l.what, dur(l.l.P50), dur(l.l.Max))
	}
	tw.Flush()
	if r.Truncated {
		fmt.Fprintln(w, "\ntruncated: stopped early, figures cover the rounds that completed")
	}
}
