package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/session"
)

// sessions opens Sessions sessions on Conns connections, holds them for
// Window while it measures the leader, and closes them.
//
// Session i < Conns is the default session of connection i (client.Dial
// opens one), so Conns = Sessions means one connection per session and
// the open rate includes the QUIC and TLS handshakes; the others are
// NewSession calls on connection i mod Conns. Concurrency opens run at
// once: raft commits them in shared batches, as it would for that many
// clients starting together.
//
// Measured: the leader's CPU over Window/5 and its resident memory
// before any bench session exists (the control connection's session
// does); its CPU over the window, which starts TTL/3 after the last open
// so that every session has renewed once and the open burst is over; its
// resident memory at the end of the window.
func (r *runner) sessions(rep *Report) error {
	h, _, err := r.holdSessions(rep)
	if h != nil {
		defer h.closeClients()
		if err == nil {
			rep.Sessions.CloseRate = rate(h.closeSessions())
		}
	}
	return err
}

// holdSessions opens the sessions and measures the leader while they are
// held; the caller closes them. It returns what it opened (nil when it
// failed before) and the leader's scraper.
func (r *runner) holdSessions(rep *Report) (*held, *scraper, error) {
	cfg := r.cfg
	admin, leaderID := cfg.Admin, ""
	if admin == "" {
		ctx, cancel := r.opCtx()
		members, err := r.ctl.Members(ctx)
		cancel()
		if err != nil {
			return nil, nil, err
		}
		if leaderID, admin, err = leaderAdmin(members); err != nil {
			return nil, nil, err
		}
		if !cfg.AllowRemote {
			if err := checkLoopback(admin); err != nil {
				return nil, nil, err
			}
		}
	}
	sc := newScraper(admin, cfg.OpTimeout, cfg.Client.TLS)
	ctx, cancel := r.opCtx()
	defer cancel()
	st0, err := sc.status(ctx)
	if err != nil {
		return nil, nil, err
	}
	if st0.State != "Leader" || (leaderID != "" && st0.ID != leaderID) {
		return nil, nil, fmt.Errorf("%w: %s is %s %s", ErrAdminNotLeader, admin, st0.State, st0.ID)
	}
	idle, before, err := r.idleCPU(sc)
	if err != nil {
		return nil, nil, err
	}
	r.logf("leader %s (admin %s): RSS %s, CPU %.1f%% before opening %d sessions", st0.ID, admin, bytes(before.rss), idle, cfg.Sessions)

	hctx, hcancel := r.opCtx()
	res0, full0, counted, err := sc.handshakes(hctx, st0.ID)
	hcancel()
	if err != nil {
		return nil, nil, err
	}
	h := &held{r: r, sessions: make([]*client.Session, cfg.Sessions)}
	opened, openTime, openLat, err := h.open()
	if err != nil {
		return h, sc, err
	}
	finish(rep, opened, openTime, OpLatency{Op: "open", Latency: Summarize(openLat)})
	load := &SessionLoad{Sessions: opened, OpenRate: rep.OpsPerSec, Leader: st0.ID, LeaderAdmin: admin, LeaderIdleCPUPercent: idle}
	if opened > 0 {
		load.TTL = Millis(h.sessions[0].TTL())
	}
	if counted {
		hctx, hcancel := r.opCtx()
		res1, full1, _, err := sc.handshakes(hctx, st0.ID)
		hcancel()
		if err != nil {
			return h, sc, err
		}
		res, full := res1-res0, full1-full0
		load.Resumed, load.FullHandshakes = &res, &full
	}
	rep.Sessions = load
	r.logf("opened %d sessions in %v", opened, openTime.Round(time.Millisecond))

	if opened == cfg.Sessions {
		if err := r.measure(rep, sc, h, before, st0); err != nil {
			return h, sc, err
		}
	}
	return h, sc, nil
}

// idleCPU measures the leader's CPU over Window/5 before any bench
// session exists (the baseline its CPU with sessions compares to) and
// returns it with the last sample.
func (r *runner) idleCPU(sc *scraper) (float64, sample, error) {
	ctx, cancel := r.opCtx()
	s0, err := sc.sample(ctx)
	cancel()
	if err != nil {
		return 0, s0, err
	}
	start := time.Now()
	sleep(r.mctx, r.cfg.Window/5)
	ctx, cancel = r.opCtx()
	defer cancel()
	s1, err := sc.sample(ctx)
	if err != nil {
		return 0, s1, err
	}
	return 100 * (s1.cpuSeconds - s0.cpuSeconds) / time.Since(start).Seconds(), s1, nil
}

// measure settles, then samples the leader and this process over the
// window.
func (r *runner) measure(rep *Report, sc *scraper, h *held, before sample, st0 adminStatus) error {
	load := rep.Sessions
	settle := time.Duration(load.TTL) / 3
	load.Settle = Millis(settle)
	if !sleep(r.mctx, settle) {
		return nil
	}
	ctx, cancel := r.opCtx()
	s1, err := sc.sample(ctx)
	cancel()
	if err != nil {
		return err
	}
	cpu1, start := selfCPU(), time.Now()
	r.logf("holding %d sessions for %v", load.Sessions, r.cfg.Window)
	sleep(r.mctx, r.cfg.Window)
	ctx, cancel = r.opCtx()
	defer cancel()
	s2, err := sc.sample(ctx)
	if err != nil {
		return err
	}
	window, cpu2 := time.Since(start), selfCPU()
	st1, err := sc.status(ctx)
	if err != nil {
		return err
	}
	// The admin address names one process: while it is the leader again
	// at the end, its CPU and memory figures are its own, even across a
	// re-election.
	if st1.State != "Leader" || st1.ID != st0.ID {
		return fmt.Errorf("%w: %s term %d, then %s %s term %d", ErrLeaderChanged, st0.ID, st0.Term, st1.State, st1.ID, st1.Term)
	}
	if st1.Term != st0.Term {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s was re-elected during the measurement (term %d to %d): a heartbeat was missed, and its figures include the election", st0.ID, st0.Term, st1.Term))
	}
	load.Window = Millis(window)
	load.LeaderCPUPercent = 100 * (s2.cpuSeconds - s1.cpuSeconds) / window.Seconds()
	load.BenchCPUPercent = 100 * (cpu2 - cpu1).Seconds() / window.Seconds()
	load.RSSBefore, load.RSSHeld = int64(before.rss), int64(s2.rss)
	load.RSSPerSession = (s2.rss - before.rss) / float64(load.Sessions)
	if s2.goroutines > 0 {
		conns := float64(min(r.cfg.Conns, load.Sessions))
		load.GoroutinesBefore, load.GoroutinesHeld = int(before.goroutines), int(s2.goroutines)
		load.GoroutinesPerConn = (s2.goroutines - before.goroutines) / conns
		load.StackPerConn = (s2.stacks - before.stacks) / conns
	}
	if before.liveHeap > 0 && s2.liveHeap > 0 {
		h := (s2.liveHeap - before.liveHeap) / float64(load.Sessions)
		load.LiveHeapPerSession = &h
	}
	load.Lost, _ = h.lost()
	if load.Lost > 0 {
		return fmt.Errorf("%w: %d of %d", ErrSessionsLost, load.Lost, load.Sessions)
	}
	return nil
}

// held is the sessions scenario's connections and sessions.
type held struct {
	r        *runner
	clients  []*client.Client
	sessions []*client.Session
}

// open opens the sessions; it stops early, without an error, when the
// measured phase ends. It returns how many it opened, how long that took
// and each open's latency (a Dial's for a connection's first session).
func (h *held) open() (int, time.Duration, []time.Duration, error) {
	cfg := h.r.cfg
	// With FullHandshakes each client gets its own ticket cache, as a
	// separate process has: its first connection is a full handshake, a
	// reconnection (after a failover) may resume.
	full := cfg.FullHandshakes && cfg.Client.TLS != nil
	n := len(h.sessions)
	h.clients = make([]*client.Client, cfg.Conns)
	ready := make([]chan struct{}, cfg.Conns)
	for i := range ready {
		ready[i] = make(chan struct{})
	}
	errs := make([]error, n)
	lat := make([]time.Duration, n)
	var next, opened atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	ctx, cancel := context.WithCancel(h.r.mctx)
	defer cancel()
	openOne := func(i int) error {
		octx, ocancel := context.WithTimeout(ctx, cfg.OpTimeout)
		defer ocancel()
		if i < cfg.Conns {
			defer close(ready[i])
			cc := cfg.Client
			if full {
				cc.TLS = cfg.Client.TLS.Clone()
				cc.TLS.ClientSessionCache = session.NewTicketCache()
			}
			if cc.Logger != nil {
				cc.Logger = cc.Logger.With("conn", i)
			}
			c, err := client.Dial(octx, cc)
			if err != nil {
				return err
			}
			h.clients[i], h.sessions[i] = c, c.Session()
			return nil
		}
		j := i % cfg.Conns
		select {
		case <-ready[j]:
		case <-ctx.Done():
			return ctx.Err()
		}
		if h.clients[j] == nil {
			return fmt.Errorf("connection %d failed", j)
		}
		s, err := h.clients[j].NewSession(octx, 0)
		h.sessions[i] = s
		return err
	}
	for range min(cfg.Concurrency, n) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n && ctx.Err() == nil; i = int(next.Add(1)) - 1 {
				t0 := time.Now()
				err := openOne(i)
				lat[i] = time.Since(t0)
				if err != nil {
					// Opens cut short by the first failure's cancel, or by
					// the measured phase's end, are not failures of their own.
					if ctx.Err() == nil {
						errs[i] = fmt.Errorf("session %d: %w", i, err)
						cancel()
					}
					continue
				}
				if k := opened.Add(1); k%1000 == 0 {
					h.r.logf("opened %d sessions", k)
				}
			}
		})
	}
	wg.Wait()
	// Dials that never ran still owe their close.
	for i := range ready {
		select {
		case <-ready[i]:
		default:
			close(ready[i])
		}
	}
	elapsed := time.Since(start)
	ok := lat[:0]
	for i, s := range h.sessions {
		if s != nil && errs[i] == nil {
			ok = append(ok, lat[i])
		}
	}
	return int(opened.Load()), elapsed, ok, firstError(errs)
}

// lost counts sessions that ended while held (those never opened are
// not counted), and of them those the server ended: the others the
// client gave up on itself, having heard from no leader within its
// session's grace (session.Tracker).
func (h *held) lost() (n, byServer int) {
	n, byServer, _ = h.lostWhy()
	return n, byServer
}

// lostWhy is lost with the error of one session its client gave up on.
func (h *held) lostWhy() (n, byServer int, example string) {
	for _, s := range h.sessions {
		if s == nil {
			continue
		}
		select {
		case <-s.Done():
			n++
			var se *session.Error
			if errors.As(s.Err(), &se) {
				byServer++
			} else if example == "" {
				example = s.Err().Error()
			}
		default:
		}
	}
	return n, byServer, example
}

// closeSessions closes every open session, Concurrency at a time, and
// returns how many it closed and how long that took.
func (h *held) closeSessions() (int, time.Duration) {
	var next, closed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range min(h.r.cfg.Concurrency, len(h.sessions)) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(h.sessions); i = int(next.Add(1)) - 1 {
				if s := h.sessions[i]; s != nil {
					ctx, cancel := h.r.opCtx()
					if s.Close(ctx) == nil {
						closed.Add(1)
					}
					cancel()
				}
			}
		})
	}
	wg.Wait()
	return int(closed.Load()), time.Since(start)
}

func (h *held) closeClients() {
	p := pool{clients: h.clients}
	p.close(h.r.cfg.Concurrency)
}

// sleep waits d or until ctx ends, reporting whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// selfCPU is the CPU time (user and system) this process used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
