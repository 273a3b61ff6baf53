package raftnode

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

// Raft's stream layers, bottom up: TCPLayer (plain TCP; or the layer
// the server's Config.RaftLayer gives, for in-memory test clusters),
// SeverLayer (sever.go), optionally FaultLayer (Config.FaultInjection:
// refuses blocked addresses), and TLSLayer on top, which raft's
// NetworkTransport uses. Every raft
// connection is mutual TLS 1.3 between members: each side presents its
// member certificate and accepts only a member certificate of the cluster
// CA (session.MemberTLS). A connection that fails the handshake never
// reaches raft: an outsider cannot append entries, vote or install a
// snapshot, whatever it sends.

// TCPLayer is a raft.StreamLayer over plain TCP.
type TCPLayer struct {
	ln        net.Listener
	advertise net.Addr
}

var _ raft.StreamLayer = (*TCPLayer)(nil)

// NewTCPLayer listens on bind. advertise, when not nil, is the address
// other members dial, as with raft.NewTCPTransport.
func NewTCPLayer(bind string, advertise net.Addr) (*TCPLayer, error) {
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
	}
	return &TCPLayer{ln: ln, advertise: advertise}, nil
}

func (l *TCPLayer) Accept() (net.Conn, error) { return l.ln.Accept() }

func (l *TCPLayer) Close() error { return l.ln.Close() }

func (l *TCPLayer) Addr() net.Addr {
	if l.advertise != nil {
		return l.advertise
	}
	return l.ln.Addr()
}

func (l *TCPLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(address), timeout)
}

// TLSLayer runs mutual TLS over an inner stream layer.
type TLSLayer struct {
	inner  raft.StreamLayer
	server *tls.Config
	client *tls.Config
	log    *slog.Logger
	// Refused, when set, counts accepted connections whose handshake
	// failed.
	Refused func()
	// PeerClosed, when set, learns of every accepted connection of a
	// member that ended: EOF or reset after a good handshake
	// (CrashDetector.PeerClosed). Set both before raft uses the layer.
	PeerClosed func(member string)
}

var _ raft.StreamLayer = (*TLSLayer)(nil)

// NewTLSLayer runs m's member TLS over inner.
func NewTLSLayer(inner raft.StreamLayer, m *session.MemberTLS, log *slog.Logger) *TLSLayer {
	return &TLSLayer{inner: inner, server: m.RaftServer(), client: m.RaftClient(), log: log}
}

// Accept returns the next connection; its handshake runs on first use, in
// raft's per-connection goroutine, so a slow peer never stalls the accept
// loop.
func (l *TLSLayer) Accept() (net.Conn, error) {
	c, err := l.inner.Accept()
	if err != nil {
		return nil, err
	}
	return &tlsServerConn{Conn: tls.Server(c, l.server), layer: l}, nil
}

func (l *TLSLayer) Close() error { return l.inner.Close() }

func (l *TLSLayer) Addr() net.Addr { return l.inner.Addr() }

// Dial connects and completes the handshake within timeout: a peer that is
// not a member fails here.
func (l *TLSLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
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
	layer  *TLSLayer
	once   sync.Once
	err    error
	member string    // the peer's member id, after the handshake
	ended  sync.Once // PeerClosed told
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
			if c.layer.Refused != nil {
				c.layer.Refused()
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
	if err != nil && c.layer.PeerClosed != nil && c.member != "" && !errors.Is(err, os.ErrDeadlineExceeded) {
		// EOF, a reset, anything but a deadline: the crash detector
		// decides with a dial whether the peer is gone.
		c.ended.Do(func() { c.layer.PeerClosed(c.member) })
	}
	return n, err
}

func (c *tlsServerConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// NetConfig is the configuration of raft's NetworkTransport over
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
func NetConfig(stream raft.StreamLayer, logger hclog.Logger) *raft.NetworkTransportConfig {
	return &raft.NetworkTransportConfig{
		Stream:          stream,
		Logger:          logger,
		MaxPool:         3,
		Timeout:         10 * time.Second,
		MaxRPCsInFlight: 1,
	}
}
