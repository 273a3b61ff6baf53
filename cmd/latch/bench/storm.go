package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/server/adminapi"
)

// Storm is what the storm scenario adds: the stability measurements of a
// cluster under a connection storm (server/doc.go, "No leader change
// without a failure").
type Storm struct {
	// OpenLeaderChanges counts leader changes seen while the sessions
	// opened and were held (it must be 0); OpenError is the first failed
	// open, if any.
	OpenLeaderChanges int    `json:"open_leader_changes"`
	OpenError         string `json:"open_error,omitempty"`
	// Kill is what was done to the leader while the sessions were held
	// (Config.Kill: "kill", "stop", "stall"), and what followed within
	// Observe.
	Kill *StormKill `json:"kill,omitempty"`
	// Flood compares lock cycles without and with a flood of handshakes
	// without a certificate and of leader probes.
	Flood *StormFlood `json:"flood,omitempty"`
}

// StormKill is the failover of a storm run.
type StormKill struct {
	// Signal is Config.Kill: "kill" (SIGKILL), "stop" (SIGSTOP) or
	// "stall" (every raft log write of the leader held through POST
	// /v1/faults/storage, a disk that stopped answering) or "freeze" (the
	// file system of its data dir frozen with fsfreeze).
	Signal  string `json:"signal"`
	Leader  string `json:"leader"`
	Observe Millis `json:"observe_ms"`
	// LeaderChanges counts leader changes within Observe of the signal
	// (1: the failover and nothing more).
	LeaderChanges int `json:"leader_changes"`
	// Lost counts held sessions that ended, LostByServer those of them
	// the cluster ended (the rest the client gave up on itself, having
	// heard from no leader within its grace); Failed the clients whose
	// first call after the signal failed.
	Lost         int `json:"lost"`
	LostByServer int `json:"lost_by_server"`
	Failed       int `json:"failed"`
	// Reconnect is the time from the signal to each client's first
	// successful call on a member other than the old leader.
	Reconnect Latency `json:"reconnect"`
	// Write is the time from the signal until one write the run made
	// right after it committed: with "stall" it is that write, stuck on
	// the leader's disk, that the member notices (an idle leader writes
	// nothing). 0: it did not commit within Observe.
	Write Millis `json:"write_ms"`
	// LeaderExit ("stall" only) is the time from the stall until the old
	// leader's admin endpoint refused connections: the member failed on
	// the stuck write (--storage-stall-timeout) and exited. 0: not within
	// Observe. A frozen member cannot exit until thawed (a thread stuck in
	// the kernel's write holds the process), so "freeze" does not count
	// it: its log says when it failed.
	LeaderExit Millis `json:"leader_exit_ms,omitempty"`
	// NewLeader and what its admission control did meanwhile: attempts
	// refused for load, handshakes full and resumed, and handshakes it
	// admitted that the client abandoned (gave up waiting, or went away).
	NewLeader      string `json:"new_leader"`
	RefusedForLoad int    `json:"refused_for_load"`
	FullHandshakes int    `json:"full_handshakes"`
	Resumed        int    `json:"resumed_handshakes"`
	Abandoned      int    `json:"abandoned_handshakes"`
	// Its admission queue (server/quicfront/queue.go): slots reserved for clients
	// that asked, used by their handshake, expired unused, busy answers
	// ("ask again later"), and the mean wait a reservation was given.
	Reserved      int    `json:"reserved"`
	ReservedUsed  int    `json:"reserved_used"`
	ReservedLapse int    `json:"reserved_expired"`
	Busy          int    `json:"busy_answers"`
	QueueWait     Millis `json:"queue_wait_mean_ms"`
}

// StormFlood is the flood comparison of a storm run.
type StormFlood struct {
	Duration Millis `json:"duration_ms"`
	// Quiet and Flooded are the certificate client's lock cycles.
	QuietCyclesPerSec   float64 `json:"quiet_cycles_per_sec"`
	QuietP99            Millis  `json:"quiet_p99_ms"`
	FloodedCyclesPerSec float64 `json:"flooded_cycles_per_sec"`
	FloodedP99          Millis  `json:"flooded_p99_ms"`
	// Separate: the flood ran in a process of its own (FloodCommand),
	// not in the measuring one. Attempts and Probes are what the flood
	// sent; LeaderChanges what it cost (it must be 0).
	Separate      bool  `json:"separate_process"`
	Attempts      int64 `json:"handshake_attempts"`
	Probes        int64 `json:"probes"`
	LeaderChanges int   `json:"leader_changes"`
}

// termWatch polls every endpoint's term and leader and counts changes.
type termWatch struct {
	r    *runner
	scs  []*scraper // every member's admin endpoint
	mu   sync.Mutex
	seen map[string]bool // "term leader" pairs seen
	n    int             // changes since mark
	last string
	stop chan struct{}
	done chan struct{}
}

// termPoll is how often termWatch asks.
const termPoll = 200 * time.Millisecond

func (r *runner) watchTerms() *termWatch {
	w := &termWatch{r: r, seen: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	// The admin endpoints (HTTPS), not the client port: under a storm the
	// client port refuses new connections, which is what is measured.
	admins, _ := r.adminScrapers(termPoll * 5)
	for _, a := range admins {
		w.scs = append(w.scs, a.sc)
	}
	w.poll()
	go func() {
		defer close(w.done)
		t := time.NewTicker(termPoll)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				w.poll()
			}
		}
	}()
	return w
}

// poll asks every endpoint; a leader in a term not seen before is a
// change (the first one seen is the starting point).
func (w *termWatch) poll() {
	for _, sc := range w.scs {
		ctx, cancel := context.WithTimeout(w.r.base, termPoll*5)
		st, err := sc.status(ctx)
		cancel()
		if err != nil || st.State != "Leader" {
			continue
		}
		key := fmt.Sprintf("%d %s", st.Term, st.ID)
		w.mu.Lock()
		if !w.seen[key] {
			if len(w.seen) > 0 {
				w.n++
			}
			w.seen[key] = true
			w.last = st.ID
		}
		w.mu.Unlock()
	}
}

// take returns the changes since the last take and starts counting anew.
func (w *termWatch) take() int {
	w.poll()
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.n
	w.n = 0
	return n
}

func (w *termWatch) close() {
	close(w.stop)
	<-w.done
}

// storm opens and holds Sessions sessions (one connection and full
// handshake each), then optionally signals the leader (Kill) and floods
// it (Flood), counting leader changes, lost sessions and failed calls.
func (r *runner) storm(rep *Report) error {
	st := &Storm{}
	tw := r.watchTerms()
	defer tw.close()
	h, sc, err := r.holdSessions(rep)
	st.OpenLeaderChanges = tw.take()
	rep.Storm = st
	if h != nil {
		defer h.closeClients()
	}
	if err != nil {
		if h == nil {
			return err
		}
		st.OpenError = err.Error()
	}
	if r.cfg.Kill != "" && h != nil && sc != nil && st.OpenError == "" {
		if err := r.kill(st, h, sc, tw); err != nil {
			return err
		}
	}
	if h != nil && rep.Sessions != nil {
		rep.Sessions.CloseRate = rate(h.closeSessions())
	}
	if r.cfg.Flood > 0 {
		return r.flood(st, tw)
	}
	return nil
}

// kill signals the leader (its pid from its admin status: the run is on
// its host) or stalls its disk, and measures every client's way back.
func (r *runner) kill(st *Storm, h *held, sc *scraper, tw *termWatch) error {
	ctx, cancel := r.opCtx()
	ast, err := sc.status(ctx)
	cancel()
	if err != nil {
		return err
	}
	if ast.State != "Leader" {
		return fmt.Errorf("%w: %s is %s by the time of the signal", ErrLeaderChanged, ast.ID, ast.State)
	}
	k := &StormKill{Signal: r.cfg.Kill, Leader: ast.ID, Observe: Millis(r.cfg.Observe)}
	// Every other member's admission counters, read before the signal:
	// whichever becomes the leader, its figures are what it did from the
	// signal on (read after it, under the storm, they came late).
	others := r.admissionCounters(ast.ID)
	tw.take()
	ac := adminapi.NewClient(adminTLS(r.cfg.Client.TLS), r.cfg.OpTimeout)
	defer ac.CloseIdleConnections()
	t0, undo, err := r.fault(ac, sc.addr, ast)
	if err != nil {
		return err
	}
	defer undo()
	st.Kill = k
	// One write right after the fault: a stalled leader notices its disk
	// only when a write is in flight.
	wrote := make(chan time.Duration, 1)
	go func() {
		ctx, cancel := context.WithDeadline(r.base, t0.Add(r.cfg.Observe))
		defer cancel()
		for {
			// A retry that finds the node its first try made counts.
			_, err := r.ctl.Create(ctx, r.path("storm-write"), []byte(k.Signal))
			if err == nil || errors.Is(err, client.ErrNodeExists) {
				wrote <- time.Since(t0)
				return
			}
			if !errors.Is(err, client.ErrUnknownOutcome) {
				r.logf("the write after the %s: %v", k.Signal, err)
				wrote <- 0
				return
			}
		}
	}()
	exited := make(chan time.Duration, 1)
	if k.Signal == "stall" {
		go func() { exited <- r.awaitExit(ac, sc.addr, t0) }()
	}
	lat := make([]time.Duration, 0, len(h.clients))
	var mu sync.Mutex
	var failed atomic.Int64
	var wg sync.WaitGroup
	for _, c := range h.clients {
		if c == nil {
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(r.base, 60*time.Second)
			defer cancel()
			// Back means served by another member: a stalled leader
			// answers reads until its first stuck write.
			for {
				_, _, err := c.Exists(ctx, "/")
				if err == nil && c.Member() != ast.ID {
					break
				}
				if err != nil || !sleep(ctx, 100*time.Millisecond) {
					failed.Add(1)
					return
				}
			}
			d := time.Since(t0)
			mu.Lock()
			lat = append(lat, d)
			mu.Unlock()
		})
	}
	wg.Wait()
	k.Reconnect = Summarize(lat)
	k.Failed = int(failed.Load())
	sleep(r.mctx, time.Until(t0.Add(r.cfg.Observe)))
	k.Write = Millis(<-wrote)
	if k.Signal == "stall" {
		k.LeaderExit = Millis(<-exited)
	}
	var why string
	k.Lost, k.LostByServer, why = h.lostWhy()
	if why != "" {
		r.logf("a session its client gave up on: %s", why)
	}
	k.LeaderChanges = tw.take()
	if nsc, id, err := r.leaderScraper(ast.ID); err == nil {
		k.NewLeader = id
		// The terms are the record: the watch's polls may all have missed
		// one leader (each answer under the storm can come late), the new
		// leader's term cannot.
		ctx, cancel := r.opCtx()
		if nst, err := nsc.status(ctx); err == nil && nst.Term > ast.Term {
			k.LeaderChanges = max(k.LeaderChanges, int(nst.Term-ast.Term))
		}
		cancel()
		if b, ok := others[id]; ok {
			a := b.read(r)
			k.RefusedForLoad = a.refused - b.refused
			k.Resumed, k.FullHandshakes = a.res-b.res, a.full-b.full
			k.Abandoned = a.abandoned - b.abandoned
			k.Reserved, k.ReservedUsed = a.reserved-b.reserved, a.used-b.used
			k.ReservedLapse, k.Busy = a.expired-b.expired, a.busy-b.busy
			if k.Reserved > 0 {
				k.QueueWait = Millis((a.waited - b.waited) / time.Duration(k.Reserved))
			}
		}
	}
	return nil
}

// leaderScraper waits for a leader other than old and returns a scraper
// of its admin endpoint.
func (r *runner) leaderScraper(old string) (*scraper, string, error) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := r.opCtx()
		members, err := r.ctl.Members(ctx)
		cancel()
		if err == nil {
			if id, admin, err := leaderAdmin(members); err == nil && id != old {
				return newScraper(admin, r.cfg.OpTimeout, r.cfg.Client.TLS), id, nil
			}
		}
		if !sleep(r.mctx, 20*time.Millisecond) {
			break
		}
	}
	return nil, "", fmt.Errorf("%w: no new leader within 30s", ErrNoAdmin)
}

// flood runs lock cycles on the run's own client for Flood without, then
// Flood with, a flood of certificate-less handshakes and leader probes
// at the leader.
func (r *runner) flood(st *Storm, tw *termWatch) error {
	ctx, cancel := r.opCtx()
	members, err := r.ctl.Members(ctx)
	cancel()
	if err != nil {
		return err
	}
	var target string
	for _, m := range members {
		if m.Leader {
			target = m.ClientAddr
		}
	}
	if target == "" {
		return fmt.Errorf("%w: no member is marked leader", ErrNoAdmin)
	}
	f := &StormFlood{Duration: Millis(r.cfg.Flood)}
	st.Flood = f
	tw.take()
	f.QuietCyclesPerSec, f.QuietP99 = r.cycles(r.cfg.Flood)
	// The flood runs as long as the flooded cycles and a little longer,
	// so they never see it end.
	fctx, fcancel := context.WithCancel(r.mctx)
	defer fcancel()
	floodFor := r.cfg.Flood + 2*time.Second
	type result struct {
		attempts, probes int64
		err              error
	}
	done := make(chan result, 1)
	go func() {
		var res result
		if cmd := r.cfg.FloodCommand; len(cmd) > 0 {
			res.attempts, res.probes, res.err = floodProcess(fctx, cmd, target, floodFor)
		} else {
			res.attempts, res.probes = Flood(fctx, target, floodFor)
		}
		done <- res
	}()
	f.Separate = len(r.cfg.FloodCommand) > 0
	// A process needs a moment to start flooding.
	sleep(r.mctx, time.Second)
	f.FloodedCyclesPerSec, f.FloodedP99 = r.cycles(r.cfg.Flood)
	res := <-done
	if res.err != nil {
		return res.err
	}
	f.Attempts, f.Probes = res.attempts, res.probes
	f.LeaderChanges = tw.take()
	return nil
}

// cycles runs lock/unlock on one lock of the run's own session for d and
// returns cycles/s and the p99 of a cycle.
func (r *runner) cycles(d time.Duration) (float64, Millis) {
	m := client.NewMutex(r.ctl.Session(), r.path("storm-lock"))
	var lat []time.Duration
	start := time.Now()
	for time.Since(start) < d && r.mctx.Err() == nil {
		ctx, cancel := r.opCtx()
		t0 := time.Now()
		err := m.Lock(ctx)
		if err == nil {
			err = m.Unlock(ctx)
		}
		cancel()
		if err != nil {
			r.logf("lock cycle: %v", err)
			continue
		}
		lat = append(lat, time.Since(t0))
	}
	s := Summarize(lat)
	return float64(len(lat)) / time.Since(start).Seconds(), s.P99
}

// counter sums a counter's samples over all its labels.
func (s *scraper) counter(ctx context.Context, name string) (int, error) {
	var sum float64
	err := s.get(ctx, "/metrics", func(rd io.Reader) error {
		var err error
		sum, err = sumSeries(rd, name)
		return err
	})
	return int(sum), err
}

// sumSeries sums the samples of the series name (every label set) in
// the Prometheus text read from rd.
func sumSeries(rd io.Reader, name string) (float64, error) {
	var sum float64
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || len(line) == len(name) || (line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		fields := strings.Fields(line[strings.LastIndexByte(line, '}')+1:])
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: bad value %q", name, fields[0])
		}
		sum += v
	}
	return sum, sc.Err()
}
