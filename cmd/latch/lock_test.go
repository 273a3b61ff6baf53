package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/server"
	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/server/servertest"
	"github.com/latch-io/latch/session"
)

// cliChildEnv makes the test binary run as the latch CLI (for tests that
// must kill a real latch process).
const cliChildEnv = "LATCH_CLI_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(cliChildEnv) != "" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	code := m.Run()
	proc.RemoveBuild()
	if fencedBuild.bin != "" {
		os.RemoveAll(filepath.Dir(fencedBuild.bin))
	}
	os.Exit(code)
}

// lockCluster is an in-process cluster for CLI lock tests and the global
// flags that reach it.
type lockCluster struct {
	*servertest.Cluster
	flags []string
	tls   *session.DevCerts
}

func startLockCluster(t *testing.T) *lockCluster {
	t.Helper()
	c := servertest.StartCluster(t, 1, &servertest.Options{
		Configure: func(i int, cfg *server.Config) { cfg.ExpiryTick = 50 * time.Millisecond },
	})
	c.WaitLeader()
	certs := c.Certs()
	return &lockCluster{Cluster: c, tls: &certs,
		flags: []string{"--endpoints", c.Server(0).ClientAddr(), "--ca", certs.CA, "--session-ttl", "2s"}}
}

// cli runs latch in-process with the cluster's flags.
func (lc *lockCluster) cli(args ...string) (int, string, string) {
	return runCLI(append(append([]string(nil), lc.flags...), args...)...)
}

// dial returns a client of the cluster, closed when the test ends.
func (lc *lockCluster) dial(t *testing.T) *client.Client {
	t.Helper()
	tlsConf, err := session.ClientTLS(lc.tls.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), servertest.WaitTimeout)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{Endpoints: []string{lc.Server(0).ClientAddr()}, TLS: tlsConf, SessionTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestLockCommand(t *testing.T) {
	lc := startLockCluster(t)
	dir := t.TempDir()

	t.Run("PrintsToken", func(t *testing.T) {
		code, out, errOut := lc.cli("lock", "/jobs/nightly", "--", "sh", "-c", "echo $LATCH_FENCING_TOKEN $LATCH_LOCK_PATH")
		f := strings.Fields(out)
		if code != 0 || len(f) != 2 || f[1] != "/jobs/nightly" {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		if tok, err := strconv.ParseUint(f[0], 10, 64); err != nil || tok == 0 {
			t.Fatalf("token %q is not a positive number", f[0])
		}
		if code, _, _ := lc.cli("lock", "/jobs/nightly", "--", "sh", "-c", "exit 3"); code != 3 {
			t.Fatalf("exit status %d, want the command's 3", code)
		}
	})

	t.Run("NeverOverlap", func(t *testing.T) {
		logFile := filepath.Join(dir, "overlap.log")
		script := `echo "start $LATCH_FENCING_TOKEN" >> ` + logFile + `; sleep 0.2; echo "end $LATCH_FENCING_TOKEN" >> ` + logFile
		var wg sync.WaitGroup
		codes := make([]int, 3)
		for i := range codes {
			wg.Go(func() { codes[i], _, _ = lc.cli("lock", "/jobs/nightly", "--", "sh", "-c", script) })
		}
		wg.Wait()
		b, err := os.ReadFile(logFile)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 2*len(codes) {
			t.Fatalf("log %q (exit codes %v)", lines, codes)
		}
		last := uint64(0)
		for i := 0; i < len(lines); i += 2 {
			s, e := strings.Fields(lines[i]), strings.Fields(lines[i+1])
			tok, _ := strconv.ParseUint(s[1], 10, 64)
			if s[0] != "start" || e[0] != "end" || s[1] != e[1] || tok <= last {
				t.Fatalf("holds overlap or tokens go back:\n%s", b)
			}
			last = tok
		}
	})

	t.Run("ParentWaitsForChild", func(t *testing.T) {
		c := lc.dial(t)
		ctx := context.Background()
		held, release := filepath.Join(dir, "held"), filepath.Join(dir, "go")
		child := make(chan int, 1)
		go func() {
			code, _, _ := lc.cli("lock", "/jobs/nightly", "--", "sh", "-c",
				"touch "+held+"; while [ ! -e "+release+" ]; do sleep 0.01; done")
			child <- code
		}()
		servertest.Eventually(t, "child lock held", func() error { _, err := os.Stat(held); return err })
		parent := make(chan string, 1)
		go func() {
			code, out, errOut := lc.cli("lock", "/jobs", "--", "sh", "-c", "test -e "+release+" && echo after")
			parent <- fmt.Sprintf("%d %s%s", code, out, errOut)
		}()
		servertest.Eventually(t, "parent queued", func() error {
			q, err := c.LockQueue(ctx, "/jobs")
			if err != nil {
				return err
			}
			if len(q) != 1 || q[0].Granted {
				return fmt.Errorf("queue on /jobs: %+v", q)
			}
			return nil
		})
		// The parent's command checks that it runs after the release.
		if err := os.WriteFile(release, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if code := <-child; code != 0 {
			t.Fatalf("child lock exited %d", code)
		}
		if got := <-parent; got != "0 after\n" {
			t.Fatalf("parent lock: %q", got)
		}
	})

	t.Run("TimeoutBoundsTheWait", func(t *testing.T) {
		c := lc.dial(t)
		m := client.NewMutex(c.Session(), "/busy")
		if err := m.Lock(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer m.Unlock(context.Background())
		code, out, errOut := lc.cli("lock", "--timeout", "200ms", "/busy", "--", "echo", "ran")
		if code != 1 || out != "" || !strings.Contains(errOut, "deadline") {
			t.Fatalf("exit %d stdout %q stderr %q", code, out, errOut)
		}
		// latch locks shows the holder, and nothing of the timed-out wait.
		code, out, _ = lc.cli("locks", "/busy")
		want := fmt.Sprintf("%s exclusive held session=%d rev=%d token=%d\n", m.Node(), c.Session().ID(), m.Revision(), m.Token())
		if code != 0 || out != want {
			t.Fatalf("latch locks: exit %d %q, want %q", code, out, want)
		}
	})
}

// TestKilledHolder SIGKILLs a `latch lock` process holding a lock: the next
// waiter gets the lock only after the dead holder's session expired and
// the lock-delay passed, and a write with the dead holder's token is
// refused by fencedstore once the new holder wrote.
func TestKilledHolder(t *testing.T) {
	const ttl, lockDelay = time.Second, 500 * time.Millisecond
	lc := startLockCluster(t)
	store := startFencedstore(t)
	c := lc.dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), servertest.WaitTimeout)
	defer cancel()

	args := append(append([]string(nil), lc.flags...), "lock", "--ttl", ttl.String(), "--lock-delay", lockDelay.String(),
		"/victim", "--", "sh", "-c", "echo $LATCH_FENCING_TOKEN $$; exec sleep 60")
	holder := exec.Command(os.Args[0], args...)
	holder.Env = append(os.Environ(), cliChildEnv+"=1")
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	holder.Stderr = &stderr
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("holder said nothing: %v; stderr %s", err, stderr.String())
	}
	var oldToken uint64
	var sleeper int
	if _, err := fmt.Sscan(line, &oldToken, &sleeper); err != nil {
		t.Fatalf("holder said %q: %v", line, err)
	}
	t.Cleanup(func() { syscall.Kill(sleeper, syscall.SIGKILL) })
	if code := store.write(t, "victim", oldToken); code != http.StatusOK {
		t.Fatalf("holder's write refused: %d", code)
	}

	m := client.NewMutex(c.Session(), "/victim")
	got := make(chan error, 1)
	go func() { got <- m.Lock(ctx) }()
	servertest.Eventually(t, "waiter queued", func() error {
		q, err := c.LockQueue(ctx, "/victim")
		if err == nil && len(q) != 2 {
			err = fmt.Errorf("queue %+v", q)
		}
		return err
	})
	killed := time.Now()
	if err := holder.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var phantom client.LockInfo
	servertest.Eventually(t, "the dead holder's lock-delay", func() error {
		q, err := c.LockQueue(ctx, "/victim")
		if err != nil {
			return err
		}
		if len(q) > 0 && q[0].Phantom {
			phantom = q[0]
			return nil
		}
		if len(q) > 0 && q[0].Session == c.Session().ID() && q[0].Granted {
			return errors.New("granted without a lock-delay")
		}
		return fmt.Errorf("queue %+v", q)
	})
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	waited := time.Since(killed)
	if min := lockDelay + ttl/2; waited < min {
		t.Fatalf("granted %v after the kill, before TTL/2 + lock-delay (%v)", waited, min)
	}
	q, err := c.LockQueue(ctx, "/victim")
	if err != nil || len(q) != 1 || q[0].Node != m.Node() {
		t.Fatalf("queue after the grant %+v %v", q, err)
	}
	expiredAt := phantom.DelayEnd - phantom.LockDelayMillis*int64(time.Millisecond)
	if phantom.LockDelayMillis != lockDelay.Milliseconds() || q[0].GrantTime-expiredAt < lockDelay.Nanoseconds() {
		t.Fatalf("granted %v after the expiry; lock-delay %dms", time.Duration(q[0].GrantTime-expiredAt), phantom.LockDelayMillis)
	}
	if m.Token() <= oldToken {
		t.Fatalf("new token %d not above the dead holder's %d", m.Token(), oldToken)
	}
	if code := store.write(t, "victim", m.Token()); code != http.StatusOK {
		t.Fatalf("new holder's write refused: %d", code)
	}
	if code := store.write(t, "victim", oldToken); code != http.StatusConflict {
		t.Fatalf("write with the dead holder's token: status %d, want 409", code)
	}
}

// cliProcess is the latch CLI running in a child process.
type cliProcess struct {
	cmd    *exec.Cmd
	stdout *bufio.Reader
	stderr *bufio.Reader
}

func (lc *lockCluster) start(t *testing.T, args ...string) *cliProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], append(append([]string(nil), lc.flags...), args...)...)
	cmd.Env = append(os.Environ(), cliChildEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errOut, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return &cliProcess{cmd: cmd, stdout: bufio.NewReader(out), stderr: bufio.NewReader(errOut)}
}

// line reads one line (without its newline) from r, failing the test on
// EOF.
func line(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	s, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read %q: %v", s, err)
	}
	return strings.TrimSuffix(s, "\n")
}

// stop sends SIGTERM and returns the exit status.
func (p *cliProcess) stop(t *testing.T) int {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	err := p.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

func TestElectCommand(t *testing.T) {
	lc := startLockCluster(t)
	obs := lc.start(t, "elect", "--observe", "/svc/leader")
	if got := line(t, obs.stdout); got != "none" {
		t.Fatalf("observer's first line %q", got)
	}
	a := lc.start(t, "elect", "/svc/leader", "node-a")
	var termA uint64
	if _, err := fmt.Sscanf(line(t, a.stderr), "latch: leading /svc/leader at term %d", &termA); err != nil {
		t.Fatal(err)
	}
	if got, want := line(t, obs.stdout), fmt.Sprintf("leader node-a %d", termA); got != want {
		t.Fatalf("observer: %q, want %q", got, want)
	}
	b := lc.start(t, "elect", "/svc/leader", "node-b")
	if got := line(t, b.stdout); got != fmt.Sprintf("leader node-a %d", termA) {
		t.Fatalf("candidate b sees %q", got)
	}
	if code := a.stop(t); code != 0 {
		t.Fatalf("leader a exited %d after SIGTERM", code)
	}
	var termB uint64
	if _, err := fmt.Sscanf(line(t, b.stderr), "latch: leading /svc/leader at term %d", &termB); err != nil || termB <= termA {
		t.Fatalf("b's term %d (%v), a's %d", termB, err, termA)
	}
	if got, want := line(t, obs.stdout), fmt.Sprintf("leader node-b %d", termB); got != want {
		t.Fatalf("observer: %q, want %q", got, want)
	}
	if code := b.stop(t); code != 0 {
		t.Fatalf("leader b exited %d", code)
	}
	if got := line(t, obs.stdout); got != "none" {
		t.Fatalf("observer after both resigned: %q", got)
	}
	if code := obs.stop(t); code != 0 {
		t.Fatalf("observer exited %d", code)
	}
}

// fencedStore is a running fencedstore binary.
type fencedStore struct{ url string }

var fencedBuild struct {
	once sync.Once
	bin  string
	err  error
}

// startFencedstore builds cmd/fencedstore (once per test binary) and runs
// it on a free port until the test ends.
func startFencedstore(t *testing.T) *fencedStore {
	t.Helper()
	fencedBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "fencedstore-build-")
		if err != nil {
			fencedBuild.err = err
			return
		}
		fencedBuild.bin = filepath.Join(dir, "fencedstore")
		fencedBuild.err = proc.GoBuild("./cmd/fencedstore", fencedBuild.bin)
	})
	if fencedBuild.err != nil {
		t.Fatal(fencedBuild.err)
	}
	dir := t.TempDir()
	addrFile := filepath.Join(dir, "addr")
	cmd := exec.Command(fencedBuild.bin, "--addr", "127.0.0.1:0", "--journal", filepath.Join(dir, "journal.jsonl"), "--addr-file", addrFile)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	var addr []byte
	servertest.Eventually(t, "fencedstore listening", func() error {
		var err error
		addr, err = os.ReadFile(addrFile)
		if err == nil && len(addr) == 0 {
			err = errors.New("empty address file")
		}
		return err
	})
	return &fencedStore{url: "http://" + string(addr)}
}

// write writes key with token and returns the HTTP status.
func (f *fencedStore) write(t *testing.T, key string, token uint64) int {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"key": key, "token": token, "client": "test", "data": strconv.FormatUint(token, 10)})
	resp, err := http.Post(f.url+"/write", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
