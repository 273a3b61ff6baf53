package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// pollInterval is how often the orchestrator lists the cluster's sessions.
const pollInterval = 250 * time.Millisecond

// run is one chaos run in progress.
type run struct {
	cfg     Config
	rng     *rand.Rand
	cluster *proc.Cluster
	store   *storeProc
	workers *workers
	faults  *faultLog
	client  *client.Client
	steady  *steadyCell // Cells 2

	mu      sync.Mutex
	unavail []Violation
}

func (r *run) logf(format string, a ...any) {
	if r.cfg.Verbose && r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, a...)...)
	}
}

func (r *run) progress(format string, a ...any) {
	if r.cfg.Log != nil {
		fmt.Fprintf(r.cfg.Log, "chaos: "+format+"\n", a...)
	}
}

// unavailable records that the cluster did not recover around a fault.
func (r *run) unavailable(kind FaultKind, when string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.unavail = append(r.unavail, Violation{ViolationUnavailable, fmt.Sprintf("%s %s: %v", kind, when, err)})
	r.progress("cluster unavailable %s %s: %v", when, kind, err)
}

// Run starts the cluster, fencedstore and the workers, injects faults for
// cfg.Duration, stops everything, checks the histories and writes the
// report to cfg.Out. The error wraps ErrViolations when a checker found a
// violation (the report names them), ErrSetup when the run could not
// start; the report is nil only then.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if len(cfg.WorkerCommand) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrSetup, err)
		}
		cfg.WorkerCommand = []string{exe, "chaos-worker"}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x1a7c4))}
	started := time.Now()
	if err := r.setup(ctx); err != nil {
		r.teardown()
		return nil, fmt.Errorf("%w: %v", ErrSetup, err)
	}
	params := Params{SessionTTL: cfg.SessionTTL, LockDelay: cfg.LockDelay, PollInterval: pollInterval,
		ElectionTimeout: electionTimeout, Workloads: cfg.Workloads, Rogue: cfg.Rogue, Start: started.UnixNano()}
	runErr := r.exercise(ctx, &params)
	r.teardown()
	if runErr != nil {
		return nil, fmt.Errorf("%w: %v", ErrSetup, runErr)
	}
	return r.check(params, time.Since(started))
}

// setup builds or finds the binaries and starts the cluster and the store.
func (r *run) setup(ctx context.Context) error {
	cfg := &r.cfg
	for _, d := range []string{cfg.Out, filepath.Join(cfg.Out, DirWorkers), filepath.Join(cfg.Out, "members")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	// A reused out dir must not mix histories of two runs.
	for _, name := range []string{FileFaults, FileWorkers, FileSessions, FileStore, FileFinal, FileParams, FileHistory,
		FileReport, FileReportText, FilePorcupine, "fencedstore-journal.jsonl"} {
		os.Remove(filepath.Join(cfg.Out, name))
	}
	for _, d := range []string{DirWorkers, "members"} {
		os.RemoveAll(filepath.Join(cfg.Out, d))
		os.MkdirAll(filepath.Join(cfg.Out, d), 0o755)
	}
	latchd, fenced := cfg.LatchdBin, cfg.FencedstoreBin
	for _, b := range []struct {
		bin       *string
		name, pkg string
	}{{&latchd, "latchd", "./cmd/latchd"}, {&fenced, "fencedstore", "./cmd/fencedstore"}} {
		if *b.bin != "" {
			continue
		}
		self, _ := os.Executable()
		var err error
		if *b.bin, err = findBinary(self, b.name, b.pkg, filepath.Join(cfg.Out, "bin"), r.progress); err != nil {
			return err
		}
	}
	certs, err := session.EnsureDevCerts(filepath.Join(cfg.Out, "tls"))
	if err != nil {
		return err
	}
	r.progress("starting %d members", cfg.Members)
	var extra []string
	admin := `""` // rogue-admin: every client without a certificate is an admin
	var cert, key string
	if cfg.MutualTLS {
		// Every client presents one client certificate (one identity, no
		// admin): rules cannot tell the workers apart, ownership does.
		const worker = "chaos-worker"
		extra = []string{"--tls-client-ca", certs.CA, "--acl-default", "allow"}
		admin = worker
		if cert, key, err = certs.Client(worker); err != nil {
			return err
		}
	}
	if cfg.InjectBug == BugRogueAdmin {
		// The harness's admin (fault injection) stays one.
		extra = append(extra, "--admins", admin+","+proc.AdminName)
	}
	if cfg.Cells == 2 {
		extra = append(extra, "--cell", CellChaos)
	}
	if r.cluster, err = startCluster(cfg.Members, latchd, filepath.Join(cfg.Out, "members"), certs, extra...); err != nil {
		return err
	}
	if r.store, err = startStore(fenced, cfg.Out, cfg.InjectBug == BugIgnoreTokens); err != nil {
		return err
	}
	tlsConf, err := session.ClientTLS(certs.CA, cert, key)
	if err != nil {
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, recoverTimeout)
	defer cancel()
	r.client, err = client.Dial(dctx, client.Config{Endpoints: r.cluster.ClientAddrs(), TLS: tlsConf,
		SessionTTL: 10 * time.Second, ClientName: "latch-chaos", Logger: cfg.Logger})
	if err != nil {
		return err
	}
	for _, p := range setupPaths {
		if _, err := r.client.Create(dctx, p, nil); err != nil && !errors.Is(err, client.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	if cfg.Cells == 2 {
		if r.steady, err = startSteadyCell(dctx, cfg, latchd, certs, cert, key, r.cluster); err != nil {
			return fmt.Errorf("steady cell: %w", err)
		}
	}
	if r.faults, err = openFaultLog(filepath.Join(cfg.Out, FileFaults), r.logf); err != nil {
		return err
	}
	r.workers = newWorkers(cfg, workerSpec{
		command: cfg.WorkerCommand, env: cfg.WorkerEnv, dir: filepath.Join(cfg.Out, DirWorkers),
		endpoints: r.cluster.ClientAddrs(), api: r.cluster.APIAddrs(), ca: certs.CA, cert: cert, key: key, store: r.store.addr,
		sessionTTL: cfg.SessionTTL, lockDelay: cfg.LockDelay, seed: cfg.Seed, bug: cfg.InjectBug, verbose: cfg.Verbose,
	}, r.logf)
	return nil
}

// exercise runs the workers under faults for the configured duration,
// then stops them and collects what the checkers need into cfg.Out.
func (r *run) exercise(ctx context.Context, params *Params) error {
	cfg := &r.cfg
	pollCtx, cancelPoll := context.WithCancel(context.Background())
	pollDone := make(chan error, 1)
	go func() { pollDone <- r.pollSessions(pollCtx) }()
	var pollOnce sync.Once
	var pollErr error
	stopPoll := func() error {
		pollOnce.Do(func() {
			cancelPoll()
			pollErr = <-pollDone
		})
		return pollErr
	}
	defer stopPoll()

	superCtx, stopSuper := context.WithCancel(ctx)
	superDone := make(chan struct{})
	if err := r.workers.startAll(); err != nil {
		stopSuper()
		return err
	}
	go func() {
		r.workers.supervise(superCtx)
		close(superDone)
	}()
	if r.steady != nil {
		r.steady.start()
	}
	span := cfg.Duration.String()
	if cfg.Rounds > 0 {
		span = fmt.Sprintf("%d rounds of faults", cfg.Rounds)
	}
	r.progress("running %s: %d workers (%v), faults %v, seed %d", span, cfg.Workers, cfg.Workloads, cfg.Faults, cfg.Seed)

	deadline := time.Now().Add(cfg.Duration)
	sched := newSchedule(cfg.Faults, r.rng)
	left := cfg.Rounds * len(cfg.Faults)
	if cfg.Rounds > 0 {
		deadline = time.Now().Add(24 * time.Hour) // the rounds end the run
	}
	next := time.Now().Add(cfg.FaultInterval)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if cfg.Rounds > 0 && left == 0 {
			sleepCtx(ctx, cfg.FaultInterval) // let the workers run after the last fault
			break
		}
		sleepCtx(ctx, time.Until(minTime(next, deadline)))
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			break
		}
		next = time.Now().Add(cfg.FaultInterval)
		kind, ok := sched.next()
		if !ok {
			continue
		}
		left--
		if err := r.inject(ctx, kind); err != nil {
			stopSuper()
			<-superDone
			return fmt.Errorf("inject %s: %w", kind, err)
		}
	}
	stopSuper()
	<-superDone
	if r.steady != nil {
		r.steady.stop()
	}

	// Workers stop on a stable cluster, so they can close their sessions.
	if _, err := r.cluster.AwaitLeader(proc.Settled, recoverTimeout); err != nil {
		r.unavailable("end", "at the end of the run", err)
	}
	infos := r.workers.stop(15 * time.Second)
	if err := stopPoll(); err != nil {
		return err
	}
	if err := r.finalReads(ctx); err != nil {
		r.progress("final reads: %v", err)
	}
	hist, err := r.store.history(ctx)
	if err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(cfg.Out, FileStore))
	if err != nil {
		return err
	}
	for _, rec := range hist {
		appendLine(f, rec)
	}
	if err := f.Close(); err != nil {
		return err
	}
	params.End = time.Now().UnixNano()
	if err := writeJSON(filepath.Join(cfg.Out, FileWorkers), infos); err != nil {
		return err
	}
	return writeJSON(filepath.Join(cfg.Out, FileParams), params)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// pollSessions lists the cluster's sessions every pollInterval into
// sessions.jsonl until ctx ends. Failed polls (during faults) are skipped:
// the checkers only trust what was seen.
func (r *run) pollSessions(ctx context.Context) error {
	f, err := os.Create(filepath.Join(r.cfg.Out, FileSessions))
	if err != nil {
		return err
	}
	defer f.Close()
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		list, err := r.client.Sessions(pctx)
		cancel()
		if err != nil {
			continue
		}
		poll := SessionPoll{Time: time.Now().UnixNano(), IDs: []uint64{}}
		for _, s := range list {
			poll.IDs = append(poll.IDs, s.ID)
		}
		if err := appendLine(f, poll); err != nil {
			return err
		}
	}
}

// finalReads reads every kv key linearizably once the workers are gone,
// recording them as the history of worker "final".
func (r *run) finalReads(ctx context.Context) error {
	h, err := CreateHistory(filepath.Join(r.cfg.Out, FileFinal), finalWorkerName)
	if err != nil {
		return err
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(ctx, recoverTimeout)
	defer cancel()
	for _, k := range kvKeys {
		for {
			_, err := kvGet(ctx, r.client, h, k)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("read %s: %w", k, err)
			}
			sleepCtx(ctx, 100*time.Millisecond)
		}
	}
	return nil
}

// teardown stops whatever setup started.
func (r *run) teardown() {
	if r.client != nil {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r.client.Session().Close(cctx)
		cancel()
		r.client.Close()
		r.client = nil
	}
	if r.workers != nil {
		r.workers.stop(5 * time.Second)
	}
	if r.steady != nil {
		r.steady.close()
	}
	if r.store != nil {
		r.store.stop()
		r.store = nil
	}
	if r.cluster != nil {
		r.cluster.Shutdown()
		r.cluster = nil
	}
	if r.faults != nil {
		r.faults.close()
		r.faults = nil
	}
}

// check loads the evidence from cfg.Out, runs the checkers and writes the
// report.
func (r *run) check(params Params, took time.Duration) (*Report, error) {
	cfg := &r.cfg
	ev, err := LoadEvidence(cfg.Out)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSetup, err)
	}
	verdicts := Check(ev, CheckOptions{VisualizePath: filepath.Join(cfg.Out, FilePorcupine)})
	verdicts = append(verdicts, verdict(CheckRecovery, "the cluster recovered after every fault", r.unavail))
	if r.steady != nil {
		verdicts = append(verdicts, r.steady.verdict)
	}
	vis := filepath.Join(cfg.Out, FilePorcupine)
	if _, err := os.Stat(vis); len(Violations(verdicts)) > 0 && errors.Is(err, os.ErrNotExist) {
		if err := VisualizeKV(ev, vis, time.Minute); err != nil {
			r.progress("porcupine visualization: %v", err)
		}
	}
	rep := newReport(cfg, ev, verdicts, took)
	if err := writeOps(filepath.Join(cfg.Out, FileHistory), ev.Ops); err != nil {
		return rep, err
	}
	if err := rep.write(cfg.Out); err != nil {
		return rep, err
	}
	if len(rep.Violations) > 0 {
		return rep, fmt.Errorf("%w: %d (%s)", ErrViolations, len(rep.Violations), rep.violationKinds())
	}
	return rep, nil
}

func writeOps(path string, ops []Op) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteOps(f, ops); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
