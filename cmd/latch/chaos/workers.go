package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// workerSpec is what every worker process is started with.
type workerSpec struct {
	command    []string // prefix; worker flags follow
	env        []string
	dir        string // Out/workers
	endpoints  []string
	api        []string // members' HTTP/JSON API addresses, for the rogue
	ca         string
	cert, key  string // client certificate (Config.MutualTLS), else ""
	store      string
	sessionTTL time.Duration
	lockDelay  time.Duration
	seed       int64
	bug        string
	verbose    bool
}

// workerProc is one running (or exited) worker process.
type workerProc struct {
	info *WorkerInfo
	cmd  *exec.Cmd
	done chan struct{}
}

// workerSlot is a place for one worker; a worker that exits is replaced
// by a new one (a new id, a new history file) while the run goes on.
type workerSlot struct {
	slot  int
	role  string
	buggy bool
	gen   int
	cur   *workerProc
}

// workers supervises the worker processes.
type workers struct {
	spec workerSpec
	logf func(string, ...any)

	mu       sync.Mutex
	slots    []*workerSlot
	infos    []*WorkerInfo
	stopping bool
	exits    chan *workerSlot
	wg       sync.WaitGroup // waiters of worker processes
}

func newWorkers(cfg *Config, spec workerSpec, logf func(string, ...any)) *workers {
	w := &workers{spec: spec, logf: logf, exits: make(chan *workerSlot, 4*cfg.Workers)}
	for i := 0; i < cfg.Workers; i++ {
		w.slots = append(w.slots, &workerSlot{slot: i, role: cfg.roleOf(i), buggy: cfg.buggy(i)})
	}
	if cfg.Rogue {
		w.slots = append(w.slots, &workerSlot{slot: cfg.Workers, role: RoleRogue})
	}
	return w
}

// start launches a new worker in slot s.
func (w *workers) start(s *workerSlot) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopping {
		return nil
	}
	id := fmt.Sprintf("w%d.%d", s.slot, s.gen)
	s.gen++
	info := &WorkerInfo{ID: id, Role: s.role, Buggy: s.buggy, History: id + ".jsonl"}
	sp := w.spec
	args := append(append([]string(nil), sp.command[1:]...),
		"--role", s.role, "--id", id,
		"--endpoints", strings.Join(sp.endpoints, ","), "--ca", sp.ca, "--store", sp.store,
		"--history", filepath.Join(sp.dir, info.History),
		"--session-ttl", sp.sessionTTL.String(), "--lock-delay", sp.lockDelay.String(),
		"--seed", fmt.Sprint(sp.seed*1000+int64(s.slot)*100+int64(s.gen)))
	if s.buggy {
		args = append(args, "--bug", sp.bug)
	}
	if s.role == RoleRogue && len(sp.api) > 0 {
		args = append(args, "--api", strings.Join(sp.api, ","))
	}
	if sp.cert != "" {
		args = append(args, "--cert", sp.cert, "--key", sp.key)
	}
	if sp.verbose {
		args = append(args, "-v")
	}
	logf, err := os.OpenFile(filepath.Join(sp.dir, id+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(sp.command[0], args...)
	cmd.Env = append(os.Environ(), sp.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	info.Started = time.Now().UnixNano()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start worker %s: %w", id, err)
	}
	info.PID = cmd.Process.Pid
	p := &workerProc{info: info, cmd: cmd, done: make(chan struct{})}
	s.cur = p
	w.infos = append(w.infos, info)
	w.logf("worker %s (%s) started, pid %d", id, s.role, info.PID)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		err := cmd.Wait()
		logf.Close()
		w.mu.Lock()
		info.Exited = time.Now().UnixNano()
		stopping := w.stopping
		w.mu.Unlock()
		close(p.done)
		if !stopping {
			w.logf("worker %s exited: %v", id, err)
			select {
			case w.exits <- s: // never blocks: a slot has one process at a time
			default:
			}
		}
	}()
	return nil
}

// startAll launches a worker in every slot.
func (w *workers) startAll() error {
	for _, s := range w.slots {
		if err := w.start(s); err != nil {
			return err
		}
	}
	return nil
}

// supervise replaces workers that exit until ctx ends. A worker exits on
// its own when its session expired (after a pause) or it could not reach
// the cluster; a short pause keeps a failing slot from spinning.
func (w *workers) supervise(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-w.exits:
			sleepCtx(ctx, 200*time.Millisecond)
			if ctx.Err() != nil {
				return
			}
			if err := w.start(s); err != nil {
				w.logf("restart slot %d: %v", s.slot, err)
			}
		}
	}
}

// live returns the slots whose worker is running and not paused.
func (w *workers) live(only func(*workerSlot) bool) []*workerSlot {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*workerSlot
	for _, s := range w.slots {
		if s.cur == nil {
			continue
		}
		select {
		case <-s.cur.done:
			continue
		default:
		}
		if only == nil || only(s) {
			out = append(out, s)
		}
	}
	return out
}

// killOne SIGKILLs a random live worker; supervise starts its successor.
func (w *workers) killOne(ctx context.Context, rng *rand.Rand, log *faultLog) error {
	live := w.live(nil)
	if len(live) == 0 {
		log.record(FaultWorkerKill, "start", nil, "no live worker")
		log.record(FaultWorkerKill, "end", nil, "")
		return nil
	}
	s := live[rng.IntN(len(live))]
	p := s.cur
	w.mu.Lock()
	p.info.Killed = time.Now().UnixNano()
	w.mu.Unlock()
	log.record(FaultWorkerKill, "start", []string{p.info.ID}, "SIGKILL")
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("worker %s survived SIGKILL", p.info.ID)
	}
	log.record(FaultWorkerKill, "end", []string{p.info.ID}, "replaced")
	return nil
}

// pauseOne SIGSTOPs a random live worker for d, then SIGCONTs it. With
// preferBuggy, buggy workers are chosen when any is live (use-after-lost
// needs a buggy holder to lose its lock).
func (w *workers) pauseOne(ctx context.Context, rng *rand.Rand, d time.Duration, preferBuggy bool, log *faultLog) error {
	live := w.live(nil)
	if preferBuggy {
		if b := w.live(func(s *workerSlot) bool { return s.buggy }); len(b) > 0 {
			live = b
		}
	}
	if len(live) == 0 {
		log.record(FaultWorkerPause, "start", nil, "no live worker")
		log.record(FaultWorkerPause, "end", nil, "")
		return nil
	}
	p := live[rng.IntN(len(live))].cur
	iv := Interval{Start: time.Now().UnixNano()}
	log.record(FaultWorkerPause, "start", []string{p.info.ID}, "SIGSTOP for "+d.String())
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return nil // it exited meanwhile
	}
	sleepCtx(ctx, d)
	p.cmd.Process.Signal(syscall.SIGCONT)
	iv.End = time.Now().UnixNano()
	w.mu.Lock()
	p.info.Pauses = append(p.info.Pauses, iv)
	w.mu.Unlock()
	log.record(FaultWorkerPause, "end", []string{p.info.ID}, "SIGCONT")
	return nil
}

// stop asks every worker to finish (SIGTERM: it closes its session and
// exits), then kills stragglers, and returns their infos.
func (w *workers) stop(timeout time.Duration) []WorkerInfo {
	w.mu.Lock()
	w.stopping = true
	var procs []*workerProc
	for _, s := range w.slots {
		if s.cur != nil {
			procs = append(procs, s.cur)
		}
	}
	w.mu.Unlock()
	for _, p := range procs {
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.cmd.Process.Signal(syscall.SIGTERM)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, p := range procs {
		select {
		case <-p.done:
		case <-ctx.Done():
			p.cmd.Process.Kill()
			<-p.done
		}
	}
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]WorkerInfo, len(w.infos))
	for i, info := range w.infos {
		out[i] = *info
	}
	return out
}
