package proc

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/session"
)

// WaitTimeout bounds every wait of this package.
const WaitTimeout = 30 * time.Second

// Options describe one latchd member.
type Options struct {
	ID      string
	DataDir string // default: a new t.TempDir()
	// Addresses; "" picks a free loopback port.
	ClientAddr, RaftAddr, HTTPAddr string
	// APIAddr is the HTTP/JSON API's address ("" picks a free port).
	APIAddr string
	// Args are further flags (e.g. --bootstrap, --join, --dev).
	Args []string
}

// Node is one latchd process (or its data and addresses while stopped).
type Node struct {
	Options
	bin     string
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when the current process exited
	err  error         // its exit error
	log  *os.File
	// paused is set between Pause and Resume: a stopped process accepts
	// connections but never answers, so waits skip it.
	paused bool
	// admin calls the admin endpoint (SetAdminTLS); nil: trust the dev CA
	// in <DataDir>/tls, present no certificate.
	admin *adminapi.Client
}

// FreeAddrs returns n loopback addresses free for TCP and UDP a moment ago.
func FreeAddrs(t TB, n int) []string {
	t.Helper()
	addrs, err := PickAddrs(n)
	if err != nil {
		t.Fatalf("proc: %v", err)
	}
	return addrs
}

// NewNode prepares a member without starting it; addresses are fixed now so
// peers can be told about them.
func NewNode(t TB, opts Options) *Node {
	t.Helper()
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	free := FreeAddrs(t, 4)
	if opts.APIAddr == "" {
		opts.APIAddr = free[3]
	}
	if opts.ClientAddr == "" {
		opts.ClientAddr = free[0]
	}
	if opts.RaftAddr == "" {
		opts.RaftAddr = free[1]
	}
	if opts.HTTPAddr == "" {
		opts.HTTPAddr = free[2]
	}
	n := &Node{Options: opts, bin: Build(t), logPath: filepath.Join(t.TempDir(), "latchd.log")}
	t.Cleanup(func() {
		n.mu.Lock()
		running := n.cmd != nil && !n.exited()
		n.mu.Unlock()
		if running {
			n.signal(syscall.SIGCONT)
			n.signal(syscall.SIGKILL)
			n.wait(WaitTimeout)
		}
		if t.Failed() {
			t.Logf("proc: last log lines of %s:\n%s", n.ID, tail(n.Logs(), 40))
		}
		n.mu.Lock()
		if n.admin != nil {
			n.admin.CloseIdleConnections()
		}
		n.mu.Unlock()
	})
	return n
}

// StartNode prepares and starts a member.
func StartNode(t TB, opts Options) *Node {
	t.Helper()
	n := NewNode(t, opts)
	n.Start(t)
	return n
}

// args is the full command line of this member. Raft timing is latchd's
// default: crash tests and chaos run what users get.
func (n *Node) args() []string {
	a := []string{"--data-dir", n.DataDir, "--client-addr", n.ClientAddr, "--raft-addr", n.RaftAddr,
		"--http-addr", n.HTTPAddr, "--api-addr", n.APIAddr}
	if n.ID != "" {
		a = append(a, "--id", n.ID)
	}
	return append(a, n.Args...)
}

// Start starts the process (again, after an exit) on the same data dir and
// addresses. Its output is appended to the member's log.
func (n *Node) Start(t TB) {
	t.Helper()
	if err := n.Launch(); err != nil {
		t.Fatalf("proc: %v", err)
	}
}

// Launch is Start returning an error, for use outside tests.
func (n *Node) Launch() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && !n.exited() {
		return fmt.Errorf("%s already running", n.ID)
	}
	f, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "--- proc: start %s %s\n", n.bin, strings.Join(n.args(), " "))
	cmd := exec.Command(n.bin, n.args()...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", n.ID, err)
	}
	done := make(chan struct{})
	n.cmd, n.done, n.err, n.log, n.paused = cmd, done, nil, f, false
	// The waiter ends when the process exits; cleanup kills it at the latest.
	go func() {
		err := cmd.Wait()
		f.Close()
		n.mu.Lock()
		n.err = err
		n.mu.Unlock()
		close(done)
	}()
	return nil
}

func (n *Node) exited() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// Running reports whether the process is alive (possibly stopped by
// SIGSTOP).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil && !n.exited()
}

func (n *Node) signal(sig os.Signal) error {
	n.mu.Lock()
	cmd := n.cmd
	n.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return errors.New("not started")
	}
	return cmd.Process.Signal(sig)
}

// wait waits for the process to exit and returns its exit code (-1 when
// killed by a signal).
func (n *Node) wait(timeout time.Duration) (int, error) {
	n.mu.Lock()
	done, cmd := n.done, n.cmd
	n.mu.Unlock()
	if cmd == nil {
		return 0, errors.New("not started")
	}
	select {
	case <-done:
	case <-time.After(timeout):
		return 0, fmt.Errorf("still running after %v", timeout)
	}
	return cmd.ProcessState.ExitCode(), nil
}

// Kill sends SIGKILL and waits for the process to die.
func (n *Node) Kill(t TB) {
	t.Helper()
	if err := n.signal(syscall.SIGKILL); err != nil {
		t.Fatalf("proc: kill %s: %v", n.ID, err)
	}
	if _, err := n.wait(WaitTimeout); err != nil {
		t.Fatalf("proc: kill %s: %v", n.ID, err)
	}
}

// Stop sends SIGTERM and returns the exit code once the process exits.
func (n *Node) Stop(t TB) int {
	t.Helper()
	if err := n.signal(syscall.SIGTERM); err != nil {
		t.Fatalf("proc: stop %s: %v", n.ID, err)
	}
	code, err := n.wait(WaitTimeout)
	if err != nil {
		t.Fatalf("proc: stop %s: %v", n.ID, err)
	}
	return code
}

// Pause sends SIGSTOP; Resume sends SIGCONT.
func (n *Node) Pause(t TB) {
	t.Helper()
	if err := n.signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("proc: pause %s: %v", n.ID, err)
	}
	n.mu.Lock()
	n.paused = true
	n.mu.Unlock()
}

// Paused reports whether the process is stopped by Pause.
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused
}

// Resume continues a paused process.
func (n *Node) Resume(t TB) {
	t.Helper()
	if err := n.signal(syscall.SIGCONT); err != nil {
		t.Fatalf("proc: resume %s: %v", n.ID, err)
	}
	n.mu.Lock()
	n.paused = false
	n.mu.Unlock()
}

// Restart starts an exited member again (after Kill or Stop).
func (n *Node) Restart(t TB) { t.Helper(); n.Start(t) }

// Logs returns everything the member wrote so far, across restarts.
func (n *Node) Logs() string {
	b, _ := os.ReadFile(n.logPath)
	return string(b)
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// adminTimeout bounds one admin request of the harness.
const adminTimeout = 2 * time.Second

// SetAdminTLS makes the harness call the member's admin endpoint with
// conf (AdminTLS: the cluster's admin). Without it a member started with
// --dev is trusted by the CA in its <DataDir>/tls.
func (n *Node) SetAdminTLS(conf *tls.Config) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.admin != nil {
		n.admin.CloseIdleConnections()
	}
	n.admin = adminapi.NewClient(conf, adminTimeout)
}

// Admin returns the member's admin endpoint client (see SetAdminTLS).
// Without SetAdminTLS it is a new client trusting the dev CA (which a
// restart may make anew): close its idle connections when done.
func (n *Node) Admin() (*adminapi.Client, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.admin != nil {
		return n.admin, nil
	}
	conf, err := session.AdminTLS(filepath.Join(n.DataDir, "tls", "ca.pem"), "", "")
	if err != nil {
		return nil, err
	}
	return adminapi.NewClient(conf, adminTimeout), nil
}

// Get fetches path from the member's admin endpoint: the status code and
// body (an error answer's message).
func (n *Node) Get(path string) (int, string, error) {
	a, err := n.Admin()
	if err != nil {
		return 0, "", err
	}
	defer func() {
		n.mu.Lock()
		if a != n.admin {
			a.CloseIdleConnections()
		}
		n.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	resp, err := a.Open(ctx, http.MethodGet, n.HTTPAddr, path, nil)
	var re *adminapi.ReplyError
	if errors.As(err, &re) {
		return re.Status, re.Reply.Error, nil
	}
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// Status reads /v1/status.
func (n *Node) Status() (adminapi.Status, error) {
	var st adminapi.Status
	code, body, err := n.Get("/v1/status")
	if err != nil {
		return st, err
	}
	if code != http.StatusOK {
		return st, fmt.Errorf("/v1/status: %d %s", code, body)
	}
	return st, json.Unmarshal([]byte(body), &st)
}

// Eventually polls cond until it returns nil or WaitTimeout passes, then
// fails t with cond's last error: servertest.Eventually with the longer
// timeout of real processes.
func Eventually(t TB, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("proc: %s: not reached after %v: %v", what, WaitTimeout, err)
		}
		time.Sleep(20 * time.Millisecond) // polling interval of a condition with a deadline
	}
}

// WaitHealthy waits until /healthz answers 200.
func (n *Node) WaitHealthy(t TB) {
	t.Helper()
	n.waitEndpoint(t, "/healthz")
}

// WaitReady waits until /readyz answers 200.
func (n *Node) WaitReady(t TB) {
	t.Helper()
	n.waitEndpoint(t, "/readyz")
}

func (n *Node) waitEndpoint(t TB, path string) {
	t.Helper()
	Eventually(t, n.ID+" "+path, func() error { return n.checkEndpoint(path) })
}

// checkEndpoint is nil when the running member answers 200 on path.
func (n *Node) checkEndpoint(path string) error {
	if !n.Running() {
		return fmt.Errorf("process exited: %v", n.exitErr())
	}
	code, body, err := n.Get(path)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("%d %s", code, strings.TrimSpace(body))
	}
	return nil
}

func (n *Node) exitErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.err
}
