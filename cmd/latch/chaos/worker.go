package chaos

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/latch-io/latch/client"
)

// Worker exit codes.
const (
	workerExitOK      = 0 // stopped by SIGTERM after closing its session
	workerExitFailed  = 1 // could not start or keep its history
	workerExitExpired = 3 // its session expired; the orchestrator starts a successor
	workerExitStuck   = 4 // it closed a session it could no longer use; a successor follows
)

// opTimeout bounds one operation of a worker.
const opTimeout = 5 * time.Second

// worker is one worker process: a client with one session running a
// workload and recording every operation in its history.
type worker struct {
	id     string
	role   string
	bug    string
	ttl    time.Duration
	delay  time.Duration
	rng    *rand.Rand
	h      *History
	c      *client.Client
	s      *client.Session
	log    *slog.Logger
	fenced *storeClient
	// stop ends on SIGTERM only; the workload's context also ends with
	// the session.
	stop context.Context
	// borrowed is the newest token the skip-lock bug has seen.
	borrowed uint64
	// http is the rogue worker's HTTP side (nil without --api).
	http *rogueHTTP
}

// WorkerOptions are the flags of `latch chaos-worker` beyond the CLI's
// global ones (--endpoints, --ca and --session-ttl reach the worker as the
// client.Config given to RunWorker).
type WorkerOptions struct {
	Role      string
	ID        string
	Store     string
	History   string
	LockDelay time.Duration
	Seed      int64
	Bug       string
	Verbose   bool
	// API lists the members' HTTP/JSON API addresses: the rogue worker
	// attacks implicit leases there too.
	API string
}

// Register declares the options as flags on fs.
func (o *WorkerOptions) Register(fs *flag.FlagSet) {
	fs.StringVar(&o.Role, "role", "", "workload: locks, kv, election, or rogue (attacks the others' nodes)")
	fs.StringVar(&o.ID, "id", "", "worker id, recorded in every history record")
	fs.StringVar(&o.Store, "store", "", "fencedstore address host:port")
	fs.StringVar(&o.History, "history", "", "history file (JSON lines, appended)")
	fs.DurationVar(&o.LockDelay, "lock-delay", time.Second, "lock-delay asked with every lock request")
	fs.Int64Var(&o.Seed, "seed", 1, "seed of the worker's random choices")
	fs.StringVar(&o.Bug, "bug", "", "injected bug this worker runs: "+strings.Join(Bugs, ", "))
	fs.BoolVar(&o.Verbose, "v", false, "log the client's reconnections and expiries")
	fs.StringVar(&o.API, "api", "", "members' HTTP/JSON API addresses, comma separated (the rogue attacks HTTP locks there)")
}

// RunWorker is `latch chaos-worker`, the process the orchestrator starts
// for each worker: it connects with cfg, runs the workload until ctx ends
// (SIGTERM) or its session expires, recording every operation, and
// returns the exit status.
func RunWorker(ctx context.Context, o WorkerOptions, cfg client.Config, stderr io.Writer) int {
	if o.ID == "" || o.History == "" || !validRole(o.Role) {
		fmt.Fprintln(stderr, "latch: chaos-worker: need --role (locks|kv|election), --id and --history")
		return 2
	}
	if o.Bug != "" && !slices.Contains(Bugs, o.Bug) {
		fmt.Fprintf(stderr, "latch: chaos-worker: unknown --bug %q\n", o.Bug)
		return 2
	}
	level := slog.LevelWarn
	if o.Verbose {
		level = slog.LevelDebug
	}
	w := worker{id: o.ID, role: o.Role, bug: o.Bug, ttl: cfg.SessionTTL, delay: o.LockDelay,
		rng: rand.New(rand.NewPCG(uint64(o.Seed), 0x70cc))}
	w.log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})).With("worker", w.id)
	var err error
	if w.h, err = CreateHistory(o.History, w.id); err != nil {
		fmt.Fprintln(stderr, "latch: chaos-worker:", err)
		return workerExitFailed
	}
	defer w.h.Close()
	w.fenced = newStoreClient(o.Store, w.id)
	if o.API != "" && o.Role == RoleRogue {
		w.http = newRogueHTTP(strings.Split(o.API, ","), cfg.TLS, w.id)
		defer w.http.close()
	}
	cfg.ClientName = w.id
	cfg.MinBackoff, cfg.MaxBackoff = 20*time.Millisecond, 500*time.Millisecond
	cfg.Logger = w.log
	code := w.run(ctx, cfg)
	if code != workerExitOK {
		w.log.Warn("worker exits", "code", code)
	}
	return code
}

func validRole(r string) bool {
	if r == RoleRogue {
		return true
	}
	for _, w := range AllWorkloads {
		if r == w {
			return true
		}
	}
	return false
}

// run connects (the session-open operation), runs the workload until
// SIGTERM or the end of the session, and closes the session on SIGTERM.
func (w *worker) run(ctx context.Context, cfg client.Config) int {
	w.stop = ctx
	id, err := w.h.Invoke(OpSessionOpen, Args{}, 0, 0)
	if err != nil {
		return workerExitFailed
	}
	dctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	w.c, err = client.Dial(dctx, cfg)
	cancel()
	if err != nil {
		// Dial may have opened a session it could not report.
		w.h.Complete(id, OutcomeUnknown, Result{}, 0, 0, err)
		return workerExitFailed
	}
	defer w.c.Close()
	w.s = w.c.Session()
	if err := w.h.Complete(id, OutcomeOK, Result{}, 0, w.s.ID(), nil); err != nil {
		return workerExitFailed
	}
	stateDone := make(chan struct{})
	go func() {
		defer close(stateDone)
		for st := range w.s.State() {
			name := st.String()
			if st == client.StateExpired && errors.Is(w.s.Err(), client.ErrSessionClosed) {
				name = "closed"
			}
			w.h.Event(EvSessionState, Result{State: name}, 0, w.s.ID())
		}
	}()

	// The workload stops on SIGTERM or when the session ends.
	wctx, wcancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-w.s.Done():
		case <-wctx.Done():
		}
		wcancel()
	}()
	var werr error
	switch w.role {
	case WorkloadKV:
		werr = w.runKV(wctx)
	case WorkloadLocks:
		werr = w.runLocks(wctx)
	case WorkloadElection:
		werr = w.runElection(wctx)
	case RoleRogue:
		werr = w.runRogue(wctx)
	}
	wcancel()
	if werr != nil && !errors.Is(werr, context.Canceled) {
		w.log.Warn("workload stopped", "err", werr)
	}
	code := workerExitOK
	switch {
	case w.s.Err() != nil:
		// The session ended under the worker (expired after a pause):
		// its successor takes over with a new session.
		<-stateDone
		return workerExitExpired
	case ctx.Err() == nil:
		// The workload gave up on its session (locks it cannot release):
		// close it, and a successor starts afresh.
		code = workerExitStuck
	}
	cid, err := w.h.Invoke(OpSessionClose, Args{}, 0, w.s.ID())
	if err != nil {
		return workerExitFailed
	}
	cctx, ccancel := context.WithTimeout(context.Background(), opTimeout)
	err = w.s.Close(cctx)
	ccancel()
	outcome := OutcomeOK
	if err != nil {
		outcome = OutcomeUnknown
	}
	w.h.Complete(cid, outcome, Result{}, 0, 0, err)
	<-stateDone
	return code
}

// pace sleeps a little between operations so a few workers do not starve
// two CPU cores, and histories stay small enough to check.
func (w *worker) pace(ctx context.Context, maxMillis int) {
	sleepCtx(ctx, time.Duration(w.rng.IntN(maxMillis+1))*time.Millisecond)
}
