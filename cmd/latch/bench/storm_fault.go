package bench

// The faults storm --kill does to the leader: a signal, a stalled raft
// log (fault injection), a frozen file system.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/latch-io/latch/server/adminapi"
)

// fault does Config.Kill to the leader ast (admin address addr) and
// returns when, and what undoes it at the end of the run (SIGCONT, the
// stall released, fsfreeze -u; for a SIGKILL, nothing).
func (r *runner) fault(ac *adminapi.Client, addr string, ast adminStatus) (time.Time, func(), error) {
	nothing := func() {}
	if r.cfg.Kill == "stall" {
		ctx, cancel := r.opCtx()
		defer cancel()
		r.logf("stalling the disk of the leader %s (every raft log write held)", ast.ID)
		t0 := time.Now()
		if err := stallStorage(ctx, ac, addr, true); err != nil {
			return t0, nothing, fmt.Errorf("%w: the leader %s refused the storage fault (start the members with --fault-injection, and run bench with an admin certificate, --cert/--key): %v", ErrBadConfig, ast.ID, err)
		}
		return t0, func() {
			// The member has normally failed and exited by now.
			ctx, cancel := r.opCtx()
			defer cancel()
			stallStorage(ctx, ac, addr, false)
		}, nil
	}
	if ast.PID <= 0 {
		return time.Time{}, nothing, fmt.Errorf("%w: the leader's status names no pid (an older latchd?)", ErrBadConfig)
	}
	if r.cfg.Kill == "freeze" {
		mnt, err := dataMount(ast.PID)
		if err != nil {
			return time.Time{}, nothing, err
		}
		r.logf("freezing the leader %s's file system %s (fsfreeze -f)", ast.ID, mnt)
		t0 := time.Now()
		if out, err := exec.Command("fsfreeze", "-f", mnt).CombinedOutput(); err != nil {
			return t0, nothing, fmt.Errorf("%w: fsfreeze -f %s: %v: %s", ErrBadConfig, mnt, err, strings.TrimSpace(string(out)))
		}
		return t0, func() {
			if out, err := exec.Command("fsfreeze", "-u", mnt).CombinedOutput(); err != nil {
				r.logf("fsfreeze -u %s: %v: %s", mnt, err, strings.TrimSpace(string(out)))
			}
		}, nil
	}
	sig, undo := syscall.SIGKILL, nothing
	if r.cfg.Kill == "stop" {
		sig = syscall.SIGSTOP
		undo = func() { syscall.Kill(ast.PID, syscall.SIGCONT) }
	}
	r.logf("sending SIG%s to the leader %s (pid %d)", strings.ToUpper(r.cfg.Kill), ast.ID, ast.PID)
	t0 := time.Now()
	if err := syscall.Kill(ast.PID, sig); err != nil {
		return t0, nothing, fmt.Errorf("signal the leader: %w", err)
	}
	return t0, undo, nil
}

// dataMount returns the mount point of the data dir (--data-dir) of the
// process pid, which must be a file system of its own (cluster.sh
// LOOPFS=1): freezing one that holds anything else (/, /tmp) would stop
// every process writing there.
func dataMount(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return "", fmt.Errorf("%w: the leader's command line: %v", ErrBadConfig, err)
	}
	var dir string
	args := strings.Split(string(b), "\x00")
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--data-dir="); ok {
			dir = v
		} else if a == "--data-dir" && i+1 < len(args) {
			dir = args[i+1]
		}
	}
	if dir == "" {
		return "", fmt.Errorf("%w: the leader (pid %d) has no --data-dir", ErrBadConfig, pid)
	}
	if !filepath.IsAbs(dir) {
		cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		if err != nil {
			return "", fmt.Errorf("%w: the leader's working directory: %v", ErrBadConfig, err)
		}
		dir = filepath.Join(cwd, dir)
	}
	if err := ownMount(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// ownMount fails unless dir is the root of a file system (its parent is
// on another device).
func ownMount(dir string) error {
	var st, parent syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadConfig, dir, err)
	}
	if err := syscall.Stat(filepath.Dir(dir), &parent); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrBadConfig, filepath.Dir(dir), err)
	}
	if dir == "/" || st.Dev == parent.Dev {
		return fmt.Errorf("%w: the leader's data dir %s is not a file system of its own; --kill freeze freezes only such a one (cluster.sh LOOPFS=1 makes them)", ErrBadConfig, dir)
	}
	return nil
}

// stallStorage holds (or releases) every raft log write of the member at
// the admin address addr: POST /v1/faults/storage, served by members
// started with --fault-injection (server/raftnode/stall.go).
func stallStorage(ctx context.Context, ac *adminapi.Client, addr string, stall bool) error {
	return ac.Do(ctx, http.MethodPost, addr, "/v1/faults/storage", map[string]bool{"stall": stall}, nil)
}

// awaitExit returns the time from t0 until the member at the admin
// address addr refuses connections (its process is gone), or 0 if it
// still answers Observe after t0.
func (r *runner) awaitExit(ac *adminapi.Client, addr string, t0 time.Time) time.Duration {
	for time.Since(t0) < r.cfg.Observe {
		ctx, cancel := r.opCtx()
		_, err := ac.Status(ctx, addr)
		cancel()
		if errors.Is(err, syscall.ECONNREFUSED) {
			return time.Since(t0)
		}
		if !sleep(r.mctx, 20*time.Millisecond) {
			break
		}
	}
	return 0
}

// adminTLS is the client's TLS configuration for the admin endpoint
// (HTTPS, not QUIC's ALPN).
func adminTLS(clientTLS *tls.Config) *tls.Config {
	if clientTLS == nil {
		return nil
	}
	conf := clientTLS.Clone()
	conf.NextProtos = nil
	return conf
}
