package python_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

func TestMain(m *testing.M) {
	code := m.Run()
	proc.RemoveBuild()
	os.Exit(code)
}

// python3 returns the interpreter, or skips t when there is none.
func python3(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed: the Python client's tests need it (apt-get install python3)")
	}
	return py
}

// errorCodes is every wire error code the server knows, by name, for the
// Python suite to check its exception table against.
func errorCodes() map[string]uint16 {
	out := map[string]uint16{}
	for c := 1; c < 1<<10; c++ {
		name := session.Code(c).String()
		if !strings.HasPrefix(name, "Code(") {
			out[name] = uint16(c)
		}
	}
	return out
}

// The Python client's unittest suite (client/python/tests) against three
// real latchd members with TLS and client certificates. The suite reaches
// the cluster through environment variables and asks this test to kill
// the leader (and restart it) over a loopback control endpoint, so the
// kills go through proc like every other process test's.
func TestPythonClient(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	py := python3(t)
	clients, err := session.EnsureDevCerts(filepath.Join(t.TempDir(), "clients"))
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := clients.Client("py-client")
	if err != nil {
		t.Fatal(err)
	}
	c := proc.StartCluster(t, 3, "--tls-client-ca", clients.CA, "--acl-default", "allow")
	c.WaitLeader(t)
	var addrs []string
	for _, nd := range c.Nodes {
		addrs = append(addrs, nd.APIAddr)
	}
	codes, err := json.Marshal(errorCodes())
	if err != nil {
		t.Fatal(err)
	}
	ctl := startControl(t, c)

	// A hung suite is stopped with SIGABRT, on which Python prints every
	// thread's traceback (PYTHONFAULTHANDLER).
	ctx, cancel := context.WithTimeout(context.Background(), suiteTimeout)
	defer cancel()
	// LATCH_PYTHON_TESTS narrows the suite (e.g. test_cluster.LeaderKill)
	// when debugging.
	args := append([]string{"-m", "unittest", "-v"}, strings.Fields(os.Getenv("LATCH_PYTHON_TESTS"))...)
	cmd := exec.CommandContext(ctx, py, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGABRT) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Dir = "tests"
	cmd.Env = append(os.Environ(),
		"PYTHONPATH="+mustAbs(t, "."),
		"PYTHONDONTWRITEBYTECODE=1",
		"PYTHONFAULTHANDLER=1",
		"LATCH_TEST_API="+strings.Join(addrs, ","),
		"LATCH_TEST_CA="+c.Certs.CA,
		"LATCH_TEST_SERVER_CERT="+c.Certs.ServerCert, // test_transport's scripted member
		"LATCH_TEST_SERVER_KEY="+c.Certs.ServerKey,
		"LATCH_TEST_CERT="+certFile,
		"LATCH_TEST_KEY="+keyFile,
		"LATCH_TEST_CONTROL=http://"+ctl,
		"LATCH_TEST_ERRORS="+string(codes),
	)
	var out proc.Output
	cmd.Stdout, cmd.Stderr = &out, &out
	if testing.Verbose() {
		cmd.Stdout = io.MultiWriter(&out, os.Stderr)
		cmd.Stderr = cmd.Stdout
	}
	err = cmd.Run()
	if !testing.Verbose() {
		t.Logf("python3 -m unittest:\n%s", out.String())
	}
	if err != nil {
		t.Fatalf("the Python client's tests failed: %v", err)
	}
	if !strings.Contains(out.String(), "cluster tests ran against") {
		t.Fatal("the cluster tests did not run (did they skip?)")
	}
}

// suiteTimeout bounds the Python suite (it takes about a minute).
const suiteTimeout = 6 * time.Minute

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// startControl serves the suite's requests to change the cluster:
// POST /kill-leader (SIGKILL the ready leader; answers its index) and
// POST /restart (start every member that is down, wait for a leader).
func startControl(t *testing.T, c *proc.Cluster) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex // one change at a time
	mux := http.NewServeMux()
	mux.HandleFunc("POST /kill-leader", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		ctlDo(t, w, func(tb proc.TB) any {
			li := c.WaitLeader(tb)
			c.Nodes[li].Kill(tb)
			return map[string]any{"killed": li, "id": c.Nodes[li].ID, "api_addr": c.Nodes[li].APIAddr}
		})
	})
	mux.HandleFunc("POST /restart", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		ctlDo(t, w, func(tb proc.TB) any {
			var started []string
			for _, nd := range c.Nodes {
				if !nd.Running() {
					nd.Restart(tb)
					started = append(started, nd.ID)
				}
			}
			for _, nd := range c.Nodes {
				nd.WaitHealthy(tb)
			}
			li := c.WaitLeader(tb)
			return map[string]any{"started": started, "leader": c.Nodes[li].ID}
		})
	})
	srv := &http.Server{Handler: mux}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return ln.Addr().String()
}

// ctlTB is the proc.TB of a control request: a failure ends the request
// with 500 and its message instead of ending the test from a goroutine
// that is not the test's.
type ctlTB struct{ *testing.T }

type ctlFailure struct{ msg string }

func (c ctlTB) Fatalf(format string, args ...any) { panic(ctlFailure{fmt.Sprintf(format, args...)}) }
func (c ctlTB) Errorf(format string, args ...any) { panic(ctlFailure{fmt.Sprintf(format, args...)}) }

func ctlDo(t *testing.T, w http.ResponseWriter, f func(proc.TB) any) {
	defer func() {
		if p := recover(); p != nil {
			var fail ctlFailure
			if f, ok := p.(ctlFailure); ok {
				fail = f
			} else {
				panic(p)
			}
			t.Logf("control: %s", fail.msg)
			http.Error(w, fail.msg, http.StatusInternalServerError)
		}
	}()
	out := f(ctlTB{t})
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

// The README's Python example, run as written against `latchd --dev`
// from the directory that holds its latch-data (as the curl walk-through
// runs), with the client package on PYTHONPATH as an install would put it.
func TestREADMEPythonExample(t *testing.T) {
	if testing.Short() {
		t.Skip("real process")
	}
	py := python3(t)
	script := proc.READMEBlock(t, "python-example", "python")
	n := proc.StartNode(t, proc.Options{Args: []string{"--dev"}})
	n.WaitReady(t)
	work := t.TempDir()
	if err := os.Symlink(n.DataDir, filepath.Join(work, "latch-data")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(work, "example.py")
	if err := os.WriteFile(file, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, file)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PYTHONPATH="+mustAbs(t, "."), "PYTHONDONTWRITEBYTECODE=1", "LATCH_API="+n.APIAddr)
	out, err := cmd.CombinedOutput()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("the README's Python example failed (%v):\n%s", err, out)
		}
		t.Fatal(err)
	}
	for _, want := range []string{"fencing token ", "created /jobs/nightly", "deleted /jobs/nightly"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("the example's output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("README example output:\n%s", out)
}
