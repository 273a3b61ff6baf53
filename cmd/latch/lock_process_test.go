//go:build linux

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/server/servertest"
)

// exitCode waits for cmd and returns its exit status.
func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// processGone reports whether pid no longer runs (gone, or a zombie
// waiting for init to reap it).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}

// SIGKILL of a `latch lock` wrapper left its command running, and a second
// `latch lock` was granted while it still worked: two holders. Now the
// command dies with the wrapper, and the second holder's work never
// overlaps the first's.
func TestLockWrapperKilled(t *testing.T) {
	lc := startLockCluster(t)
	logFile := filepath.Join(t.TempDir(), "work.log")
	// The first holder appends "1" forever; the second appends "2" once.
	first := lc.start(t, "lock", "--ttl", "1s", "--lock-delay", "200ms", "/work", "--",
		"sh", "-c", `echo 1 >> `+logFile+`; echo $$; while :; do echo 1 >> `+logFile+`; sleep 0.02; done`)
	pid, err := strconv.Atoi(line(t, first.stdout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.cmd.Wait()
	servertest.Eventually(t, "the command died with its wrapper", func() error {
		if !processGone(pid) {
			return fmt.Errorf("pid %d still runs", pid)
		}
		return nil
	})
	code, out, errOut := lc.cli("lock", "/work", "--", "sh", "-c", "echo 2 >> "+logFile+"; sleep 0.3; echo done")
	if code != 0 || out != "done\n" {
		t.Fatalf("second lock: exit %d, %q %q", code, out, errOut)
	}
	b, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(b))
	if len(lines) < 2 || lines[0] != "1" || lines[len(lines)-1] != "2" {
		t.Fatalf("the first holder worked on after the second was granted: %v", lines)
	}
}

func TestLockExitStatus(t *testing.T) {
	lc := startLockCluster(t)
	c := lc.dial(t)
	ctx := context.Background()

	// A missing command: 127, as shells say, and no lock taken.
	code, _, errOut := lc.cli("lock", "/missing", "--", "no-such-command-latch")
	if code != 127 || !strings.Contains(errOut, "no-such-command-latch") {
		t.Fatalf("missing command: exit %d, %q", code, errOut)
	}
	if _, err := c.Stat(ctx, "/missing"); !errors.Is(err, client.ErrNoNode) {
		t.Fatalf("a lock was taken for a missing command: %v", err)
	}

	// SIGINT to latch reaches the command as SIGINT: 130, not 143.
	p := lc.start(t, "lock", "/int", "--", "sh", "-c", "echo ready; exec sleep 30")
	if got := line(t, p.stdout); got != "ready" {
		t.Fatalf("command said %q", got)
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	if code := exitCode(t, p.cmd); code != 130 {
		t.Fatalf("interrupted command: exit %d, want 130", code)
	}

	// SIGINT while waiting for the lock: 130 too.
	m := client.NewMutex(c.Session(), "/int")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	p = lc.start(t, "lock", "/int", "--", "echo", "never")
	servertest.Eventually(t, "second latch lock queued", func() error {
		q, err := c.LockQueue(ctx, "/int")
		if err == nil && len(q) != 2 {
			err = fmt.Errorf("queue %+v", q)
		}
		return err
	})
	p.cmd.Process.Signal(syscall.SIGINT)
	if code := exitCode(t, p.cmd); code != 130 {
		t.Fatalf("interrupted wait: exit %d, want 130", code)
	}
	m.Unlock(ctx)
}

// The lock path latch lock created goes after the release when it is
// empty; a path that existed before, or has other children, stays.
func TestLockRemovesCreatedPath(t *testing.T) {
	lc := startLockCluster(t)
	c := lc.dial(t)
	ctx := context.Background()
	if _, err := c.Create(ctx, "/kept", nil); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/made/deep/path", "/kept/sub", "/kept"} {
		if code, _, errOut := lc.cli("lock", path, "--", "true"); code != 0 {
			t.Fatalf("lock %s: exit %d %s", path, code, errOut)
		}
	}
	for _, gone := range []string{"/made", "/kept/sub"} {
		if _, err := c.Stat(ctx, gone); !errors.Is(err, client.ErrNoNode) {
			t.Errorf("%s stayed behind: %v", gone, err)
		}
	}
	if _, err := c.Stat(ctx, "/kept"); err != nil {
		t.Errorf("/kept existed before and must stay: %v", err)
	}
	// A child created meanwhile keeps the path.
	code, _, errOut := lc.cli("lock", "/busy-dir", "--", "sh", "-c", "true")
	if code != 0 {
		t.Fatal(errOut)
	}
	p := lc.start(t, "lock", "/shared-dir", "--", "sh", "-c", "echo ready; read x")
	line(t, p.stdout)
	if _, err := c.Create(ctx, "/shared-dir/data", nil); err != nil {
		t.Fatal(err)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.cmd.Wait()
	if _, err := c.Stat(ctx, "/shared-dir/data"); err != nil {
		t.Fatalf("a path with another child was touched: %v", err)
	}
}

// openPTY opens a pseudo-terminal pair, or skips the test.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	var n uint32
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		m.Close()
		t.Skipf("no pseudo-terminals here: %v", e)
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, m.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		m.Close()
		t.Skipf("no pseudo-terminals here: %v", e)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

// An interactive command (reading the terminal) was stopped by the terminal
// and hung holding the lock. Now it runs in the terminal's foreground, and
// the terminal's Ctrl-C ends it with 130.
func TestLockInteractive(t *testing.T) {
	lc := startLockCluster(t)
	master, tty := openPTY(t)
	cmd := exec.Command(os.Args[0], append(append([]string(nil), lc.flags...),
		"lock", "/tty", "--", "sh", "-c", `read line; echo "got $line"; exec sleep 30`)...)
	cmd.Env = append(os.Environ(), cliChildEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	out := make(chan string, 64)
	go func() {
		r := bufio.NewReader(master)
		for {
			s, err := r.ReadString('\n')
			if s != "" {
				out <- s
			}
			if err != nil {
				close(out)
				return
			}
		}
	}()
	c := lc.dial(t)
	servertest.Eventually(t, "lock held", func() error {
		q, err := c.LockQueue(context.Background(), "/tty")
		if err == nil && (len(q) != 1 || !q[0].Granted) {
			err = fmt.Errorf("queue %+v", q)
		}
		return err
	})
	if _, err := master.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(servertest.WaitTimeout)
	for got := false; !got; {
		select {
		case s, ok := <-out:
			if !ok {
				t.Fatal("terminal closed before the command answered")
			}
			got = strings.Contains(s, "got hello")
		case <-deadline:
			t.Fatal("the interactive command never read the terminal")
		}
	}
	if _, err := master.Write([]byte{0x03}); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	if code := exitCode(t, cmd); code != 130 {
		t.Fatalf("Ctrl-C: exit %d, want 130", code)
	}
}
