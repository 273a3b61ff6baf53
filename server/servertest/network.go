package servertest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// Network is an in-memory network for the raft traffic of in-process
// members (Options.InMemory): each member listens on an address of the
// network through Config.RaftLayer, and a connection between two members
// is a pair of buffers in memory under raft's mutual TLS, which runs as it
// does over TCP. A test cuts the network with Partition and mends it with
// Heal.
//
// It shows raft and the crash detector what a real network shows them,
// the way the fault layer behind POST /v1/faults does over TCP
// (server/raftnode/faultlayer.go):
//   - A dial to an address no one listens on (a stopped member) is
//     refused (syscall.ECONNREFUSED): the crash detector's sure sign of a
//     dead leader (server/raftnode/crashdetect.go).
//   - A dial across a cut fails at once, and a cut resets every
//     connection that crosses it: both ends read EOF, writes fail.
//   - Closing a listener (its member stopping) resets every connection to
//     or from that address, as a dead process's kernel closes its sockets.
//
// Addresses are host:port; port 0 in Listen picks a free one.
type Network struct {
	mu        sync.Mutex
	listeners map[string]*memListener
	cuts      map[[2]string]bool // unordered pairs of addresses, lower first
	pairs     map[*connPair]struct{}
	lastPort  int
}

// NewNetwork returns an empty network with no cuts.
func NewNetwork() *Network {
	return &Network{
		listeners: map[string]*memListener{},
		cuts:      map[[2]string]bool{},
		pairs:     map[*connPair]struct{}{},
	}
}

// errCut fails a dial across a cut.
var errCut = errors.New("servertest: network: cut between these addresses")

// memBacklog is how many dialed connections a listener holds before it
// accepts them; a dial beyond it is refused.
const memBacklog = 128

// streamBuffer bounds the bytes one direction of a connection holds
// unread: a writer waits beyond it, so a snapshot streams rather than
// landing in memory whole.
const streamBuffer = 256 << 10

// Listen returns a raft stream layer listening on addr (host:port; port 0
// picks a free port): the function for Config.RaftLayer.
func (n *Network) Listen(addr string) (raft.StreamLayer, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("servertest: network: %w", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if port == "0" {
		for {
			n.lastPort++
			addr = net.JoinHostPort(host, strconv.Itoa(n.lastPort))
			if n.listeners[addr] == nil {
				break
			}
		}
	}
	if n.listeners[addr] != nil {
		return nil, &net.OpError{Op: "listen", Net: memNet, Addr: memAddr(addr), Err: syscall.EADDRINUSE}
	}
	l := &memListener{net: n, addr: memAddr(addr), backlog: make(chan net.Conn, memBacklog), done: make(chan struct{})}
	n.listeners[addr] = l
	return l, nil
}

// Partition cuts the network between every two addresses in different
// groups, replacing earlier cuts; an address in no group keeps all its
// links. Connections across a new cut are reset.
func (n *Network) Partition(groups ...[]string) {
	cuts := map[[2]string]bool{}
	for i, g := range groups {
		for _, h := range groups[i+1:] {
			for _, a := range g {
				for _, b := range h {
					cuts[link(a, b)] = true
				}
			}
		}
	}
	n.mu.Lock()
	n.cuts = cuts
	doomed := n.takePairs(func(p *connPair) bool { return cuts[link(p.dialer, p.listener)] })
	n.mu.Unlock()
	resetAll(doomed)
}

// Heal removes every cut.
func (n *Network) Heal() { n.Partition() }

func link(a, b string) [2]string {
	if b < a {
		a, b = b, a
	}
	return [2]string{a, b}
}

// takePairs removes and returns the connections match selects. The
// caller holds n.mu.
func (n *Network) takePairs(match func(*connPair) bool) []*connPair {
	var out []*connPair
	for p := range n.pairs {
		if match(p) {
			out = append(out, p)
			delete(n.pairs, p)
		}
	}
	return out
}

func resetAll(pairs []*connPair) {
	for _, p := range pairs {
		p.toListener.reset()
		p.toDialer.reset()
	}
}

func (n *Network) dial(from, to string) (net.Conn, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.listeners[from] == nil {
		return nil, &net.OpError{Op: "dial", Net: memNet, Source: memAddr(from), Addr: memAddr(to), Err: net.ErrClosed}
	}
	if n.cuts[link(from, to)] {
		return nil, &net.OpError{Op: "dial", Net: memNet, Source: memAddr(from), Addr: memAddr(to), Err: errCut}
	}
	l := n.listeners[to]
	if l == nil {
		return nil, &net.OpError{Op: "dial", Net: memNet, Source: memAddr(from), Addr: memAddr(to), Err: syscall.ECONNREFUSED}
	}
	p := &connPair{dialer: from, listener: to, toListener: newStream(), toDialer: newStream()}
	p.ends[0] = &memConn{net: n, pair: p, local: memAddr(from), remote: memAddr(to), in: p.toDialer, out: p.toListener}
	p.ends[1] = &memConn{net: n, pair: p, local: memAddr(to), remote: memAddr(from), in: p.toListener, out: p.toDialer}
	select {
	case l.backlog <- p.ends[1]:
	default:
		return nil, &net.OpError{Op: "dial", Net: memNet, Source: memAddr(from), Addr: memAddr(to), Err: syscall.ECONNREFUSED}
	}
	n.pairs[p] = struct{}{}
	return p.ends[0], nil
}

// closeListener stops l and resets every connection to or from its
// address.
func (n *Network) closeListener(l *memListener) {
	n.mu.Lock()
	if n.listeners[string(l.addr)] != l {
		n.mu.Unlock()
		return
	}
	delete(n.listeners, string(l.addr))
	close(l.done)
	a := string(l.addr)
	doomed := n.takePairs(func(p *connPair) bool { return p.dialer == a || p.listener == a })
	n.mu.Unlock()
	resetAll(doomed)
}

func (n *Network) forget(p *connPair) {
	n.mu.Lock()
	delete(n.pairs, p)
	n.mu.Unlock()
}

const memNet = "memnet"

// memAddr is an address of a Network.
type memAddr string

func (memAddr) Network() string  { return memNet }
func (a memAddr) String() string { return string(a) }

// memListener is one member's raft stream layer on a Network.
type memListener struct {
	net     *Network
	addr    memAddr
	backlog chan net.Conn
	done    chan struct{}
}

var _ raft.StreamLayer = (*memListener)(nil)

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.backlog:
		return c, nil
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: memNet, Addr: l.addr, Err: net.ErrClosed}
	}
}

func (l *memListener) Close() error {
	l.net.closeListener(l)
	return nil
}

func (l *memListener) Addr() net.Addr { return l.addr }

// Dial connects from this listener's address, so a cut between the two
// addresses applies. It never waits: a connection is made or refused at
// once.
func (l *memListener) Dial(address raft.ServerAddress, _ time.Duration) (net.Conn, error) {
	return l.net.dial(string(l.addr), string(address))
}

// connPair is one connection: its two ends and a stream each way.
type connPair struct {
	dialer, listener     string
	toListener, toDialer *stream
	ends                 [2]*memConn
}

// stream carries bytes one way, holding at most streamBuffer unread.
type stream struct {
	mu       sync.Mutex
	buf      []byte
	rclosed  bool // the reading end closed
	wclosed  bool // the writing end closed: reads drain buf, then EOF
	broken   bool // reset: reads EOF and writes fail at once
	rdl, wdl time.Time
	wake     chan struct{} // closed and replaced on every change
}

func newStream() *stream { return &stream{wake: make(chan struct{})} }

// changed wakes every waiter. The caller holds s.mu.
func (s *stream) changed() {
	close(s.wake)
	s.wake = make(chan struct{})
}

func (s *stream) reset() {
	s.mu.Lock()
	s.broken, s.buf = true, nil
	s.changed()
	s.mu.Unlock()
}

// wait blocks until s changes or deadline passes.
func wait(wake <-chan struct{}, deadline time.Time) {
	if deadline.IsZero() {
		<-wake
		return
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-wake:
	case <-t.C:
	}
}

func passed(deadline time.Time) bool { return !deadline.IsZero() && !time.Now().Before(deadline) }

func (s *stream) read(b []byte) (int, error) {
	for {
		s.mu.Lock()
		switch {
		case s.rclosed:
			s.mu.Unlock()
			return 0, net.ErrClosed
		case len(s.buf) > 0:
			n := copy(b, s.buf)
			s.buf = s.buf[n:]
			s.changed()
			s.mu.Unlock()
			return n, nil
		case s.wclosed || s.broken:
			s.mu.Unlock()
			return 0, io.EOF
		case passed(s.rdl):
			s.mu.Unlock()
			return 0, os.ErrDeadlineExceeded
		}
		wake, dl := s.wake, s.rdl
		s.mu.Unlock()
		wait(wake, dl)
	}
}

func (s *stream) write(b []byte) (int, error) {
	done := 0
	for done < len(b) {
		s.mu.Lock()
		switch {
		case s.wclosed:
			s.mu.Unlock()
			return done, net.ErrClosed
		case s.rclosed || s.broken:
			s.mu.Unlock()
			return done, syscall.EPIPE
		case passed(s.wdl):
			s.mu.Unlock()
			return done, os.ErrDeadlineExceeded
		}
		if room := streamBuffer - len(s.buf); room > 0 {
			k := min(room, len(b)-done)
			s.buf = append(s.buf, b[done:done+k]...)
			done += k
			s.changed()
			s.mu.Unlock()
			continue
		}
		wake, dl := s.wake, s.wdl
		s.mu.Unlock()
		wait(wake, dl)
	}
	return done, nil
}

// memConn is one end of a connection on a Network.
type memConn struct {
	net           *Network
	pair          *connPair
	local, remote memAddr
	in, out       *stream
	once          sync.Once
}

var _ net.Conn = (*memConn)(nil)

func (c *memConn) Read(b []byte) (int, error) {
	n, err := c.in.read(b)
	if err != nil && err != io.EOF {
		err = &net.OpError{Op: "read", Net: memNet, Source: c.local, Addr: c.remote, Err: err}
	}
	return n, err
}

func (c *memConn) Write(b []byte) (int, error) {
	n, err := c.out.write(b)
	if err != nil {
		err = &net.OpError{Op: "write", Net: memNet, Source: c.local, Addr: c.remote, Err: err}
	}
	return n, err
}

// Close ends this end: the peer reads what was written, then EOF.
func (c *memConn) Close() error {
	c.once.Do(func() {
		c.in.mu.Lock()
		c.in.rclosed, c.in.buf = true, nil
		c.in.changed()
		c.in.mu.Unlock()
		c.out.mu.Lock()
		c.out.wclosed = true
		c.out.changed()
		c.out.mu.Unlock()
		c.net.forget(c.pair)
	})
	return nil
}

func (c *memConn) LocalAddr() net.Addr  { return c.local }
func (c *memConn) RemoteAddr() net.Addr { return c.remote }

func (c *memConn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

func (c *memConn) SetReadDeadline(t time.Time) error {
	c.in.mu.Lock()
	c.in.rdl = t
	c.in.changed()
	c.in.mu.Unlock()
	return nil
}

func (c *memConn) SetWriteDeadline(t time.Time) error {
	c.out.mu.Lock()
	c.out.wdl = t
	c.out.changed()
	c.out.mu.Unlock()
	return nil
}
