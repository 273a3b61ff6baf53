package proc

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The functions below drive members outside a test (`latch chaos`): the
// same Node, with errors returned instead of failing a test, and no
// cleanup registered: the caller kills what it launched.

// PickAddrs returns n loopback addresses whose ports were free for both TCP
// and UDP a moment ago (a member binds its client address for QUIC).
//
// Ports come from below the kernel's ephemeral range, at random: a port the
// kernel hands out for port-0 binds and outgoing connections (other tests'
// listeners, raft and QUIC dials) would often be taken again between this
// check and the member's own bind, which made cluster tests fail with
// "address already in use" on a busy machine. A port is handed out once
// per process: members set up one after another each pick their ports
// while the others are not bound yet, and two of them drawing the same
// port failed a chaos test's set-up the same way.
func PickAddrs(n int) ([]string, error) {
	lo, hi := 10000, ephemeralLow()
	if hi-lo < 1000 {
		lo = 1024
	}
	var addrs []string
	var held []io.Closer
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for tries := 0; len(addrs) < n; tries++ {
		if tries > 1000 {
			return nil, fmt.Errorf("free port: no free TCP+UDP port in %d..%d after %d tries", lo, hi-1, tries)
		}
		port := lo + rand.IntN(hi-lo)
		if !handOut(port) {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		held = append(held, ln)
		// Any of them may become the client's QUIC (UDP) address: the
		// port must be free for UDP too.
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			continue
		}
		held = append(held, pc)
		addrs = append(addrs, addr)
	}
	return addrs, nil
}

// handedOut holds the ports PickAddrs returned in this process.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// handOut claims port for good, unless it was handed out before.
func handOut(port int) bool {
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports[port] {
		return false
	}
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	handedOut.ports[port] = true
	return true
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 32768
	}
	p, err := strconv.Atoi(f[0])
	if err != nil || p <= 1024 {
		return 32768
	}
	return p
}

// NewDetachedNode prepares a member run by bin, logging to logPath, without
// starting it. opts.DataDir is required; empty addresses get free loopback
// ports.
func NewDetachedNode(opts Options, bin, logPath string) (*Node, error) {
	if opts.DataDir == "" || bin == "" || logPath == "" {
		return nil, errors.New("proc: NewDetachedNode needs a data dir, a binary and a log path")
	}
	free, err := PickAddrs(4)
	if err != nil {
		return nil, fmt.Errorf("proc: %w", err)
	}
	for i, a := range []*string{&opts.ClientAddr, &opts.RaftAddr, &opts.HTTPAddr, &opts.APIAddr} {
		if *a == "" {
			*a = free[i]
		}
	}
	return &Node{Options: opts, bin: bin, logPath: logPath}, nil
}

// Signal sends sig to the running process. SIGSTOP marks the member paused
// (waits skip it) and SIGCONT clears that, as Pause and Resume do.
func (n *Node) Signal(sig syscall.Signal) error {
	if err := n.signal(sig); err != nil {
		return fmt.Errorf("proc: signal %s: %w", n.ID, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		n.mu.Lock()
		n.paused = true
		n.mu.Unlock()
	case syscall.SIGCONT:
		n.mu.Lock()
		n.paused = false
		n.mu.Unlock()
	}
	return nil
}

// WaitExit waits up to timeout for the process to exit and returns its
// exit code (-1 when killed by a signal).
func (n *Node) WaitExit(timeout time.Duration) (int, error) {
	code, err := n.wait(timeout)
	if err != nil {
		return 0, fmt.Errorf("proc: %s: %w", n.ID, err)
	}
	return code, nil
}

// Await polls the admin endpoint path (e.g. "/readyz") until it answers
// 200, the process exits, or timeout passes.
func (n *Node) Await(path string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := n.checkEndpoint(path)
		if err == nil {
			return nil
		}
		if !n.Running() || time.Now().After(deadline) {
			return fmt.Errorf("proc: %s %s: %w", n.ID, path, err)
		}
		time.Sleep(20 * time.Millisecond) // polling interval of a condition with a deadline
	}
}

// LogPath is the file the member's output is appended to.
func (n *Node) LogPath() string { return n.logPath }

// Binary is the latchd binary the member runs.
func (n *Node) Binary() string { return n.bin }
