package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/latch-io/latch/client"
)

func init() {
	register(&command{
		name:    "lock",
		usage:   "[--shared] [--ttl D] [--lock-delay D] [--timeout D] PATH -- COMMAND [ARGS]",
		summary: "run a command while holding a lock; its exit status is the command's",
		help: `Waits for the lock on PATH (exclusive, or shared with --shared), runs
COMMAND with LATCH_FENCING_TOKEN (the lock's fencing token), LATCH_LOCK_PATH,
LATCH_LOCK_NODE and LATCH_SESSION in its environment, and releases the lock
when it exits. A lock on PATH covers PATH's subtree: "latch lock /jobs" waits
while "latch lock /jobs/nightly" holds, and the other way round.

--timeout bounds the wait for the lock (default: wait until interrupted).
--ttl is the lock's session TTL: when latch dies without releasing, the lock
is free again after that much time plus the lock-delay; COMMAND dies with
latch (the kernel kills it when latch is killed). If the lock is lost while
COMMAND runs (the session expired), COMMAND gets SIGTERM and, after
--kill-after, SIGKILL, and latch exits with status 1. SIGINT, SIGTERM or
SIGHUP to latch is passed on to COMMAND. COMMAND runs in its own process
group, which those signals reach; when latch runs in the foreground of a
terminal, that group gets the terminal (an interactive COMMAND works, and
Ctrl-C goes to it).

Exit status: COMMAND's; 128+N when it died of signal N (130 for Ctrl-C);
127 when COMMAND is not found (126: not executable), without taking the
lock; 130 when interrupted while waiting for the lock; 1 on other errors.
When latch lock created PATH (or its missing parents) and they are empty
after the release, it removes them.`,
		minArgs: 2, maxArgs: -1,
		setup: func(fs *flag.FlagSet) runFunc {
			shared := fs.Bool("shared", false, "take the lock shared: other shared holders run at the same time")
			ttl := fs.Duration("ttl", 0, "session TTL of the lock (default: --session-ttl)")
			delay := fs.Duration("lock-delay", 0, "how long the lock stays unavailable when latch dies holding it\n(default: the server's, 5s; 0s: none once given)")
			killAfter := fs.Duration("kill-after", 5*time.Second, "after a lost lock, SIGKILL the command this long after SIGTERM")
			return func(ctx context.Context, e *env, args []string) error {
				o := lockRun{shared: *shared, killAfter: *killAfter, path: args[0], argv: args[1:]}
				if *ttl > 0 {
					e.g.sessionTTL = *ttl
				}
				if given(fs, "lock-delay") {
					o.opts = append(o.opts, client.WithLockDelay(*delay))
				}
				o.wait = given(fs, "timeout") || e.g.timeout != defaultGlobals().timeout
				return o.run(ctx, e)
			}
		},
	})
}

// given reports whether the flag name was set on fs.
func given(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// exitStatus is the exit status of a command latch ran, to become latch's
// own; run prints nothing for it.
type exitStatus int

func (s exitStatus) Error() string {
	return "latch: command exited with status " + strconv.Itoa(int(s))
}

// lockRun is one `latch lock`.
type lockRun struct {
	shared    bool
	wait      bool // --timeout bounds the wait for the lock
	killAfter time.Duration
	path      string
	argv      []string
	opts      []client.LockOption
}

// heldLock is what lock and unlock need of a Mutex or an RWMutex.
type heldLock interface {
	Token() uint64
	Sequencer() client.Sequencer
	Lost() <-chan struct{}
	Err() error
}

func (o *lockRun) run(ctx context.Context, e *env) error {
	// Resolve the command before taking the lock, and fail as shells do.
	if _, err := exec.LookPath(o.argv[0]); err != nil {
		fmt.Fprintf(e.stderr, "latch: %s: %v\n", o.argv[0], err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return exitStatus(127)
		}
		return exitStatus(126)
	}
	// The signal latch gets is passed on as it is (a Ctrl-C is a SIGINT to
	// the command, which shells report as 130, not a SIGTERM's 143).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	// ctx ends on those signals, and only after the signal is recorded
	// (main's own signal context would race with it).
	ctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	var got atomic.Value // the first signal received
	go func() {
		select {
		case sig := <-sigs:
			got.Store(sig)
			stop()
			for sig := range sigs {
				got.Store(sig)
			}
		case <-ctx.Done():
		}
	}()
	signalled := func() (syscall.Signal, bool) {
		sig, ok := got.Load().(os.Signal)
		if !ok {
			return 0, false
		}
		return sig.(syscall.Signal), true
	}
	setup, cancel := e.withTimeout(ctx)
	c, err := e.client(setup)
	cancel()
	if err != nil {
		return err
	}
	s := c.Session()
	var (
		held   heldLock
		lock   func(context.Context) error
		unlock func(context.Context) error
		node   func() string
	)
	if o.shared {
		m := client.NewRWMutex(s, o.path, o.opts...)
		held, lock, unlock, node = m, m.RLock, m.RUnlock, m.Node
	} else {
		m := client.NewMutex(s, o.path, o.opts...)
		held, lock, unlock, node = m, m.Lock, m.Unlock, m.Node
	}
	wctx := ctx
	if o.wait {
		var cancel context.CancelFunc
		wctx, cancel = e.withTimeout(ctx)
		defer cancel()
	}
	if err := lock(wctx); err != nil {
		if sig, ok := signalled(); ok {
			fmt.Fprintf(e.stderr, "latch: lock %s: interrupted (%v) while waiting\n", o.path, sig)
			return exitStatus(128 + int(sig))
		}
		return fmt.Errorf("latch: lock %s: %w", o.path, err)
	}
	rev := revisionOf(held)
	status, runErr := o.runCommand(ctx, e, held, node(), signalled)
	rctx, rcancel := context.WithTimeout(context.Background(), e.g.timeout)
	defer rcancel()
	if err := unlock(rctx); err != nil && runErr == nil && !errors.Is(err, client.ErrLockLost) {
		runErr = fmt.Errorf("latch: release %s: %w", o.path, err)
	} else if err == nil {
		removeCreated(rctx, c, o.path, rev)
	}
	if runErr != nil {
		return runErr
	}
	if status != 0 {
		return exitStatus(status)
	}
	return nil
}

// revisionOf is the held request's revision: nodes created by the same
// command were created by this `latch lock`.
func revisionOf(held heldLock) uint64 {
	if r, ok := held.(interface{ Revision() uint64 }); ok {
		return r.Revision()
	}
	return 0
}

// removeCreated deletes path and its ancestors that the lock request (at
// revision rev) created, while they are empty: a lock path latch lock made
// does not stay behind. Each delete is conditional on the version seen, and
// anything else (a child appeared, someone changed it) leaves it.
func removeCreated(ctx context.Context, c *client.Client, path string, rev uint64) {
	for p := path; rev != 0 && p != "/"; p = parentPath(p) {
		st, err := c.Stat(ctx, p)
		if err != nil || st.CreateRev != rev || st.NumChildren != 0 {
			return
		}
		if err := c.Delete(ctx, p, client.WithVersion(st.Version)); err != nil {
			return
		}
	}
}

func parentPath(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// runCommand runs the command while the lock is held and returns its exit
// status. A lost lock stops it and is the error.
func (o *lockRun) runCommand(ctx context.Context, e *env, held heldLock, node string, signalled func() (syscall.Signal, bool)) (int, error) {
	sq := held.Sequencer()
	cmd := exec.Command(o.argv[0], o.argv[1:]...)
	cmd.Env = append(os.Environ(),
		"LATCH_FENCING_TOKEN="+strconv.FormatUint(sq.Token, 10),
		"LATCH_LOCK_PATH="+o.path,
		"LATCH_LOCK_NODE="+node,
		"LATCH_SESSION="+strconv.FormatUint(sq.Session, 10),
	)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, e.stdout, e.stderr
	attr, foreground := childAttr()
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(e.stderr, "latch: run %s: %v\n", o.argv[0], err)
		return 126, nil
	}
	if foreground {
		defer reclaimTerminal()
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	group := func(sig syscall.Signal) { _ = syscall.Kill(-cmd.Process.Pid, sig) }
	var lostErr error
	lost, interrupted := held.Lost(), ctx.Done()
	var kill <-chan time.Time
	for {
		select {
		case err := <-exited:
			if lostErr != nil {
				return 1, lostErr
			}
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					return 128 + int(ws.Signal()), nil
				}
				return ee.ExitCode(), nil
			}
			return 0, err
		case <-lost:
			lost = nil
			lostErr = fmt.Errorf("latch: lock %s lost while %s ran: %w", o.path, o.argv[0], held.Err())
			fmt.Fprintf(e.stderr, "%v; stopping it\n", lostErr)
			group(syscall.SIGTERM)
			kill = time.After(o.killAfter)
		case <-interrupted:
			interrupted = nil
			sig, ok := signalled()
			if !ok {
				sig = syscall.SIGTERM
			}
			group(sig)
			kill = time.After(o.killAfter)
		case <-kill:
			group(syscall.SIGKILL)
			kill = nil
		}
	}
}
