package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/latch-io/latch/session"
)

// raftHandshakeTimeout bounds a raft TLS handshake, so a peer that
// connects and stays silent holds nothing for long.
const raftHandshakeTimeout = 10 * time.Second

// Raft's stream layers, bottom up: tcpLayer (plain TCP; or the layer
// Config.RaftLayer gives, for in-memory test clusters), optionally
// faultLayer (Config.FaultInjection: refuses blocked addresses), and
// tlsLayer on top, which raft's NetworkTransport uses. Every raft
// connection is mutual TLS 1.3 between members: each side presents its
// member certificate and accepts only a member certificate of the cluster
// CA (session.MemberTLS). A connection that fails the handshake never
// reaches raft: an outsider cannot append entries, vote or install a
// snapshot, whatever it sends.

// tcpLayer is a raft.StreamLayer over plain TCP.
type tcpLayer struct {
	ln        net.Listener
	advertise net.Addr
}

var _ raft.StreamLayer = (*tcpLayer)(nil)

// newTCPLayer listens on bind. advertise, when not nil, is the address
// other members dial, as with raft.NewTCPTransport.
func newTCPLayer(bind string, advertise net.Addr) (*tcpLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	l := &tcpLayer{ln: ln, advertise: advertise}
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok || addr.IP == nil || addr.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("%w: raft address %v is not advertisable (set RaftAdvertise)", ErrBadConfig, l.Addr())
	}
	return l, nil
}

func (l *tcpLayer) Accept() (net.Conn, error) { return l.ln.Accept() }

func (l *tcpLayer) Close() error { return l.ln.Close() }

func (l *tcpLayer) Addr() net.Addr {
	if l.advertise != nil {
		return l.advertise
	}
	return l.ln.Addr()
}

func (l *tcpLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(address), timeout)
}

// tlsLayer runs mutual TLS over an inner stream layer.
type tlsLayer struct {
	inner  raft.StreamLayer
	server *tls.Config
	client *tls.Config
	log    *slog.Logger
	// refused counts accepted connections whose handshake failed.
	refused func()
	// peerClosed, when set, learns of every accepted connection of a
	// member that ended: EOF or reset after a good handshake.
	peerClosed func(member string)
}

var _ raft.StreamLayer = (*tlsLayer)(nil)

func newTLSLayer(inner raft.StreamLayer, m *session.MemberTLS, log *slog.Logger, refused func()) *tlsLayer {
	return &tlsLayer{inner: inner, server: m.RaftServer(), client: m.RaftClient(), log: log, refused: refused}
}

// Accept returns the next connection; its handshake runs on first use, in
// raft's per-connection goroutine, so a slow peer never stalls the accept
// loop.
func (l *tlsLayer) Accept() (net.Conn, error) {
	c, err := l.inner.Accept()
	if err != nil {
		return nil, err
	}
	return &tlsServerConn{Conn: tls.Server(c, l.server), layer: l}, nil
}

func (l *tlsLayer) Close() error { return l.inner.Close() }

func (l *tlsLayer) Addr() net.Addr { return l.inner.Addr() }

// Dial connects and completes the handshake within timeout: a peer that is
// not a member fails here.
func (l *tlsLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	start := time.Now()
	c, err := l.inner.Dial(address, timeout)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(timeout-time.Since(start), time.Millisecond))
	defer cancel()
	tc := tls.Client(c, l.client)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("latch: raft TLS handshake with %s: %w", address, err)
	}
	return tc, nil
}

// tlsServerConn is an accepted connection that completes its handshake,
// with a deadline, before the first read or write.
type tlsServerConn struct {
	*tls.Conn
	layer  *tlsLayer
	once   sync.Once
	err    error
	member string    // the peer's member id, after the handshake
	ended  sync.Once // peerClosed told
}

func (c *tlsServerConn) handshake() error {
	c.once.Do(func() {
		c.Conn.SetDeadline(time.Now().Add(raftHandshakeTimeout))
		err := c.Conn.Handshake()
		c.Conn.SetDeadline(time.Time{})
		switch {
		case errors.Is(err, io.EOF):
			// Closed before a word was said: a crash detector's dial
			// (crashdetect.go) or a port scan, nothing refused.
			c.layer.log.Debug("raft connection closed before its handshake", "remote", c.Conn.RemoteAddr().String())
		case err != nil:
			c.layer.log.Warn("raft connection refused: TLS handshake failed (not a member?)",
				"remote", c.Conn.RemoteAddr().String(), "err", err)
			if c.layer.refused != nil {
				c.layer.refused()
			}
		}
		if err != nil {
			c.Conn.Close()
			// raft logs anything but EOF as a decode error of its own.
			c.err = io.EOF
			return
		}
		c.member, _ = session.PeerMember(c.Conn.ConnectionState())
	})
	return c.err
}

func (c *tlsServerConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(b)
	if err != nil && c.layer.peerClosed != nil && c.member != "" && !errors.Is(err, os.ErrDeadlineExceeded) {
		// EOF, a reset, anything but a deadline: the crash detector
		// decides with a dial whether the peer is gone.
		c.ended.Do(func() { c.layer.peerClosed(c.member) })
	}
	return n, err
}

func (c *tlsServerConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// raftNetConfig is the configuration of raft's NetworkTransport over
// stream.
//
// MaxRPCsInFlight 1 turns raft's pipelined replication off: the leader
// replicates with one AppendEntries at a time per follower, each batching
// up to MaxAppendEntries entries. hashicorp/raft (v1.8.0) can deadlock a
// pipeline: when its response decoder stops (a follower answered with a
// newer term, as after every leadership hand-over, or with Success
// false) the send loop may still send twice, and the second send waits
// forever for the decoder, which waits for the consumer that stopped.
// The pipeline is closed only by that send loop, and raft's Shutdown
// waits for it: Close hung for good, and until then the follower got
// heartbeats but no entries. Two RPCs in flight (raft's default) is what
// made both of the pipeline's channels unbuffered; more would only make
// the deadlock rarer.
func raftNetConfig(stream raft.StreamLayer, logger hclog.Logger) *raft.NetworkTransportConfig {
	return &raft.NetworkTransportConfig{
		Stream:          stream,
		Logger:          logger,
		MaxPool:         3,
		Timeout:         10 * time.Second,
		MaxRPCsInFlight: 1,
	}
}

// raftBottomLayer is the stream layer under everything else: plain TCP,
// or Config.RaftLayer's.
func (s *Server) raftBottomLayer() (raft.StreamLayer, error) {
	cfg := &s.cfg
	if cfg.RaftLayer != nil {
		return cfg.RaftLayer(cfg.RaftAddr)
	}
	var advertise net.Addr
	if cfg.RaftAdvertise != "" {
		var err error
		if advertise, err = net.ResolveTCPAddr("tcp", cfg.RaftAdvertise); err != nil {
			return nil, fmt.Errorf("%w: RaftAdvertise: %v", ErrBadConfig, err)
		}
	}
	return newTCPLayer(cfg.RaftAddr, advertise)
}

// newRaftTransport builds raft's NetworkTransport over mutual TLS, with the
// fault layer under it when fault injection is on.
func (s *Server) newRaftTransport(m *session.MemberTLS) error {
	cfg := &s.cfg
	bottom, err := s.raftBottomLayer()
	if err != nil {
		if errors.Is(err, ErrBadConfig) {
			return err
		}
		return fmt.Errorf("latch: raft transport on %s: %w", cfg.RaftAddr, err)
	}
	s.sever = newSeverLayer(bottom)
	inner := raft.StreamLayer(s.sever)
	if cfg.FaultInjection {
		s.faults = newFaultLayer(inner)
		inner = s.faults
	}
	s.crash = newCrashDetector(cfg.ID, s.log, s.stop)
	s.crash.dial = bottom.Dial
	tl := newTLSLayer(inner, m, s.log, func() { s.countRefused("raft") })
	tl.peerClosed = s.crash.peerClosed
	s.trans = raft.NewNetworkTransportWithConfig(raftNetConfig(tl, newHCLog(s.log, "raft-net")))
	s.raftAddr = string(s.trans.LocalAddr())
	s.crash.trans, s.crash.addr = s.trans, s.trans.LocalAddr()
	return nil
}
