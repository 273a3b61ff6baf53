package proc

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

// The functions below drive members outside a test (`latch chaos`): the
// same Node, with errors returned instead of failing a test, and no
// cleanup registered: the caller kills what it launched.

// PickAddrs returns n loopback addresses whose ports were free for both TCP
// and UDP a moment ago (a member binds its client address for QUIC).
func PickAddrs(n int) ([]string, error) {
	var addrs []string
	var held []io.Closer
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for tries := 0; len(addrs) < n; tries++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		held = append(held, ln)
		// Any of them may become the client's QUIC (UDP) address: the
		// port must be free for UDP too.
		pc, err := net.ListenPacket("udp", ln.Addr().String())
		if err != nil {
			if tries > 100 {
				return nil, fmt.Errorf("free port: %w", err)
			}
			continue
		}
		held = append(held, pc)
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
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
