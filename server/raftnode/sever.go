package raftnode

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// A member whose disk stopped answering must look dead to the others at
// once. latchd exits on ErrStorageStalled (stall.go), but a process with a
// thread stuck in a write the kernel does not return from (a frozen file
// system: the thread sleeps uninterruptibly until the thaw) cannot finish
// exiting, and its sockets stay open: its raft port keeps accepting, the
// crash detector never sees it die, and the others wait out the heartbeat
// timeout instead. So the raft network sits on a severable layer: on a
// stall the member closes its raft listener and every raft connection
// itself, before anything that might block. The others read EOF, find the
// port refusing, and elect at once (crashdetect.go), as after a crash.

// SeverLayer is the bottom raft stream layer, tracking every connection
// it accepted or dialed so that Sever can close them all.
type SeverLayer struct {
	raft.StreamLayer

	mu      sync.Mutex
	severed bool
	conns   map[*severConn]struct{}
}

var errSevered = errors.New("latch: raft network severed (storage stalled)")

// NewSeverLayer tracks the connections of inner.
func NewSeverLayer(inner raft.StreamLayer) *SeverLayer {
	return &SeverLayer{StreamLayer: inner, conns: map[*severConn]struct{}{}}
}

func (l *SeverLayer) Accept() (net.Conn, error) {
	c, err := l.StreamLayer.Accept()
	if err != nil {
		return nil, err
	}
	return l.track(c)
}

func (l *SeverLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := l.StreamLayer.Dial(address, timeout)
	if err != nil {
		return nil, err
	}
	return l.track(c)
}

func (l *SeverLayer) track(c net.Conn) (net.Conn, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.severed {
		_ = c.Close()
		return nil, errSevered
	}
	sc := &severConn{Conn: c, l: l}
	l.conns[sc] = struct{}{}
	return sc, nil
}

// Sever closes the listener and every raft connection, and refuses any
// later one. Safe to call more than once.
func (l *SeverLayer) Sever() {
	l.mu.Lock()
	if l.severed {
		l.mu.Unlock()
		return
	}
	l.severed = true
	conns := l.conns
	l.conns = nil
	l.mu.Unlock()
	_ = l.StreamLayer.Close()
	for c := range conns {
		_ = c.Conn.Close()
	}
}

type severConn struct {
	net.Conn
	l *SeverLayer
}

func (c *severConn) Close() error {
	c.l.mu.Lock()
	delete(c.l.conns, c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}
