package session

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

// Config tunes the QUIC transport. A zero field takes its default.
type Config struct {
	// MaxFrameSize bounds one frame body this side reads. Default
	// DefaultMaxFrameSize; at most 64 MiB.
	MaxFrameSize int
	// MaxIncomingStreams is how many streams a client may have open at
	// once on one connection (a streaming request, or a unary one not on
	// the mux stream, is a stream). Default 10000.
	MaxIncomingStreams int64
	// KeepAlivePeriod is how often an idle client connection sends a QUIC
	// ping so that NATs and the idle timeout keep it open. Default 5s.
	// Servers send none (ServerQUICConfig): the client's pings, and its
	// acks of them, keep both sides' idle timers and the NAT's mapping
	// alive, and a server pinging each of thousands of idle connections
	// as well doubles the packets they cost it.
	KeepAlivePeriod time.Duration
	// MaxIdleTimeout closes a connection that heard nothing for this long.
	// Default 30s.
	MaxIdleTimeout time.Duration
	// FailureTimeout (clients only) closes a connection whose member
	// stopped answering while a call waited on it: a request in flight or
	// a streaming request open, except the lock notices stream. While one
	// waits, the client pings after a quarter of it without an answer
	// (one QUIC datagram that the member echoes, see EchoPings). An idle
	// connection sends no such pings; KeepAlivePeriod and MaxIdleTimeout
	// guard it. Default 0: off.
	FailureTimeout time.Duration
	// HandshakeTimeout bounds the QUIC+TLS handshake: a peer silent for
	// this long during it is dropped, and no handshake may take more than
	// twice this. Default 3s: a member holds an abandoned handshake (a
	// client that gave up, or lost a CONNECTION_REFUSED packet and waits
	// in silence) for this long, and a refused client retries after it;
	// on a LAN a live handshake is never silent for a second.
	HandshakeTimeout time.Duration
	// DisableMux: a client sends every request on a stream of its own
	// even to a server that serves the mux stream (FeatureMux); a server
	// does not offer it (nor FeatureLockCall), like a member built before
	// it.
	DisableMux bool
}

// DefaultConfig returns the defaults documented on Config's fields.
func DefaultConfig() Config {
	return Config{
		MaxFrameSize:       DefaultMaxFrameSize,
		MaxIncomingStreams: 10000,
		KeepAlivePeriod:    5 * time.Second,
		MaxIdleTimeout:     30 * time.Second,
		HandshakeTimeout:   3 * time.Second,
	}
}

// Validate rejects negative values and sizes out of range, naming the field.
func (c Config) Validate() error {
	switch {
	case c.MaxFrameSize < 0 || c.MaxFrameSize > maxFrameLimit:
		return fmt.Errorf("%w: MaxFrameSize %d not in [0, %d]", ErrBadConfig, c.MaxFrameSize, maxFrameLimit)
	case c.MaxFrameSize > 0 && c.MaxFrameSize < 1024:
		return fmt.Errorf("%w: MaxFrameSize %d below 1024", ErrBadConfig, c.MaxFrameSize)
	case c.MaxIncomingStreams < 0:
		return fmt.Errorf("%w: MaxIncomingStreams %d is negative", ErrBadConfig, c.MaxIncomingStreams)
	case c.KeepAlivePeriod < 0:
		return fmt.Errorf("%w: KeepAlivePeriod %v is negative", ErrBadConfig, c.KeepAlivePeriod)
	case c.MaxIdleTimeout < 0:
		return fmt.Errorf("%w: MaxIdleTimeout %v is negative", ErrBadConfig, c.MaxIdleTimeout)
	case c.HandshakeTimeout < 0:
		return fmt.Errorf("%w: HandshakeTimeout %v is negative", ErrBadConfig, c.HandshakeTimeout)
	case c.FailureTimeout < 0:
		return fmt.Errorf("%w: FailureTimeout %v is negative", ErrBadConfig, c.FailureTimeout)
	case c.FailureTimeout > 0 && c.FailureTimeout < 4*time.Millisecond:
		return fmt.Errorf("%w: FailureTimeout %v is below 4ms", ErrBadConfig, c.FailureTimeout)
	}
	c = c.withDefaults()
	if c.KeepAlivePeriod >= c.MaxIdleTimeout {
		return fmt.Errorf("%w: KeepAlivePeriod %v must be below MaxIdleTimeout %v", ErrBadConfig, c.KeepAlivePeriod, c.MaxIdleTimeout)
	}
	return nil
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MaxFrameSize == 0 {
		c.MaxFrameSize = d.MaxFrameSize
	}
	if c.MaxIncomingStreams == 0 {
		c.MaxIncomingStreams = d.MaxIncomingStreams
	}
	if c.KeepAlivePeriod == 0 {
		c.KeepAlivePeriod = d.KeepAlivePeriod
	}
	if c.MaxIdleTimeout == 0 {
		c.MaxIdleTimeout = d.MaxIdleTimeout
	}
	if c.HandshakeTimeout == 0 {
		c.HandshakeTimeout = d.HandshakeTimeout
	}
	return c
}

// Flow-control windows: what one peer may send before the other reads it,
// so what a connection may make this side buffer. quic-go's defaults
// (512 KiB growing to 6 MiB per stream, 768 KiB to 15 MiB per connection)
// are sized for bulk transfer; latch carries requests and answers of at
// most a frame (a value is at most 64 KiB, a frame MaxFrameSize), so
// smaller windows cost no round trip on the common path and bound what a
// client that sends without end (or a member to a client that does not
// read) can park in the other's memory: MaxConnectionReceiveWindow per
// connection instead of 15 MiB. They are limits, not buffers: an idle
// connection holds none of it.
const (
	// initialStreamWindow holds a request carrying a largest value (64
	// KiB) and its header at once, without a window update.
	initialStreamWindow = 128 << 10
	// initialConnWindow holds a few of those at once.
	initialConnWindow = 512 << 10
	// minMaxStreamWindow is where quic-go's auto-tuning of a stream's
	// window stops (raised to a whole largest frame when MaxFrameSize is
	// larger): a streaming transfer of large frames keeps the path full.
	minMaxStreamWindow = 2 << 20
)

// windows fills the flow-control windows of qc for c (see above).
func windows(qc *quic.Config, c Config) *quic.Config {
	stream := max(minMaxStreamWindow, uint64(c.MaxFrameSize+frameHeaderLen))
	qc.InitialStreamReceiveWindow = initialStreamWindow
	qc.MaxStreamReceiveWindow = stream
	qc.InitialConnectionReceiveWindow = initialConnWindow
	qc.MaxConnectionReceiveWindow = 2 * stream
	return qc
}

// ServerQUICConfig returns the quic-go configuration of a server listener.
// Clients may open MaxIncomingStreams request streams at once and no
// unidirectional ones: the protocol has none. Datagrams carry liveness
// pings (EchoPings). Flow-control windows are sized for latch's frames.
// The server sends no keep-alive pings (see Config.KeepAlivePeriod): a
// client that stops pinging is dropped after the idle timeout, as it
// should be.
func ServerQUICConfig(c Config) *quic.Config {
	c = c.withDefaults()
	return windows(&quic.Config{
		HandshakeIdleTimeout:  c.HandshakeTimeout,
		MaxIdleTimeout:        c.MaxIdleTimeout,
		MaxIncomingStreams:    c.MaxIncomingStreams,
		MaxIncomingUniStreams: -1,
		EnableDatagrams:       true,
	}, c)
}

// ClientQUICConfig returns the quic-go configuration of a client
// connection. The server never opens streams towards a client.
func ClientQUICConfig(c Config) *quic.Config {
	c = c.withDefaults()
	return windows(&quic.Config{
		HandshakeIdleTimeout:  c.HandshakeTimeout,
		MaxIdleTimeout:        c.MaxIdleTimeout,
		KeepAlivePeriod:       c.KeepAlivePeriod,
		MaxIncomingStreams:    -1,
		MaxIncomingUniStreams: -1,
		EnableDatagrams:       c.FailureTimeout > 0,
	}, c)
}

// Stream error codes, sent in RESET_STREAM and STOP_SENDING frames.
const (
	// StreamDone: this side wants nothing more from the stream.
	StreamDone quic.StreamErrorCode = 0
	// StreamCanceled: the request's context ended; the server should drop
	// the work (a lock waiter withdraws, a watch ends).
	StreamCanceled quic.StreamErrorCode = 1
	// StreamMalformed: the peer sent a frame that could not be read.
	StreamMalformed quic.StreamErrorCode = 2
)

// Connection error codes, sent when a connection is closed.
const (
	ConnClosed   quic.ApplicationErrorCode = 0 // orderly close
	ConnVersion  quic.ApplicationErrorCode = 1 // Hello carried another protocol version
	ConnProtocol quic.ApplicationErrorCode = 2 // the peer broke the protocol
	ConnShutdown quic.ApplicationErrorCode = 3 // the server is stopping
	// ConnNotLeader: the member stopped being the leader; the client
	// looks for the new one (connections are to the leader).
	ConnNotLeader quic.ApplicationErrorCode = 5
	ConnBusy      quic.ApplicationErrorCode = 4 // the server holds as many connections as it takes (the reason names the cap)
)

// Conn is one client↔server QUIC connection. It embeds *quic.Conn for
// AcceptStream, CloseWithError, ConnectionState, Context and addresses,
// and remembers this side's frame limit.
type Conn struct {
	*quic.Conn
	maxFrame int
	dog      *watchdog // client side with Config.FailureTimeout, else nil
	noMux    bool
	mux      atomic.Pointer[mux] // set by Hello when the server serves it
}

// MaxFrameSize is the largest frame body this side reads on c.
func (c *Conn) MaxFrameSize() int { return c.maxFrame }

// Identity is the peer's TLS identity (see Identity); "" when the peer
// presented no certificate.
func (c *Conn) Identity() string { return Identity(c.ConnectionState().TLS) }

// Close closes c in an orderly way; streams in flight fail on both sides.
func (c *Conn) Close() error { return c.CloseWithError(ConnClosed, "") }

// Listener accepts latch connections. It owns its UDP socket and QUIC
// transport, so Close releases everything at once instead of leaving
// recently closed connections to linger.
type Listener struct {
	tls      *tls.Config // the config quic-go clones for every handshake
	udp      *net.UDPConn
	tr       *quic.Transport
	ql       *quic.Listener
	maxFrame int
}

// Listen opens a QUIC listener on the UDP address addr. tlsConf (typically
// from ServerTLS) is cloned and pinned to TLS 1.3 and ALPN; cfg is
// validated first. adm, when not nil, admits or refuses every connection
// attempt before its handshake starts.
func Listen(addr string, tlsConf *tls.Config, cfg Config, adm Admission) (*Listener, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	uaddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("latch: listen %s: %w", addr, err)
	}
	udp, err := net.ListenUDP("udp", uaddr)
	if err != nil {
		return nil, fmt.Errorf("latch: listen %s: %w", addr, err)
	}
	tr := &quic.Transport{Conn: udp}
	if adm != nil {
		tr.ConnContext = connContext(adm)
	}
	pinned := pinTLS(tlsConf)
	ql, err := tr.Listen(pinned, ServerQUICConfig(cfg))
	if err != nil {
		tr.Close()
		udp.Close()
		return nil, fmt.Errorf("latch: listen %s: %w", addr, err)
	}
	return &Listener{tls: pinned, udp: udp, tr: tr, ql: ql, maxFrame: cfg.MaxFrameSize}, nil
}

// Accept waits for the next connection whose handshake completed.
func (l *Listener) Accept(ctx context.Context) (*Conn, error) {
	qc, err := l.ql.Accept(ctx)
	if err != nil {
		return nil, err
	}
	acceptedConn(qc)
	return &Conn{Conn: qc, maxFrame: l.maxFrame}, nil
}

// SetTicketKeys sets the keys that seal and open TLS session tickets:
// the first seals, all open. Members that share their keys resume each
// other's clients, so a failover costs resumed handshakes, not full ones.
func (l *Listener) SetTicketKeys(keys [][32]byte) { l.tls.SetSessionTicketKeys(keys) }

// Addr is the UDP address the listener is bound to.
func (l *Listener) Addr() net.Addr { return l.ql.Addr() }

// Close stops accepting and closes every connection accepted by l, then
// the socket. A server that wants to say goodbye closes its connections
// (ConnShutdown) first.
func (l *Listener) Close() error {
	return errors.Join(l.ql.Close(), l.tr.Close(), ignoreClosed(l.udp.Close()))
}

func ignoreClosed(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Dial connects to a latch server at the UDP address addr. tlsConf
// (typically from ClientTLS) is cloned and pinned to TLS 1.3 and ALPN; a
// server that does not speak ALPN fails the handshake. The handshake is
// bounded by ctx and cfg.HandshakeTimeout. When tlsConf has a
// ClientSessionCache, the session tickets in it are kept per address
// (see resumeAt).
func Dial(ctx context.Context, addr string, tlsConf *tls.Config, cfg Config) (*Conn, error) {
	d, err := NewDialer()
	if err != nil {
		return nil, err
	}
	return d.Dial(ctx, addr, tlsConf, cfg)
}

// resumeAt keeps c's session tickets per server address. A member's
// tickets are sealed with its own key and the keys its peers share with it
// (server/quicfront/ticketkeys.go), and Go's cache key is the server name, which
// members often share (one DNS name for the cluster, or 127.0.0.1 on one
// machine). So a dial offers the ticket of that address first, else the
// newest ticket of any address with the name: after a failover the new
// leader opens a ticket the old one sealed. A ticket it cannot open costs
// nothing but the full handshake there would have been anyway.
func resumeAt(c *tls.Config, addr string) *tls.Config {
	if c.ClientSessionCache != nil {
		c.ClientSessionCache = addrSessionCache{c.ClientSessionCache, addr}
	}
	return c
}

// addrSessionCache is a tls.ClientSessionCache whose keys carry the
// server's address.
type addrSessionCache struct {
	tls.ClientSessionCache
	addr string
}

func (a addrSessionCache) Get(key string) (*tls.ClientSessionState, bool) {
	if cs, ok := a.ClientSessionCache.Get(a.addr + " " + key); ok {
		return cs, true
	}
	return a.ClientSessionCache.Get("* " + key)
}

func (a addrSessionCache) Put(key string, cs *tls.ClientSessionState) {
	a.ClientSessionCache.Put(a.addr+" "+key, cs)
	if cs != nil {
		a.ClientSessionCache.Put("* "+key, cs)
	}
}

func pinTLS(c *tls.Config) *tls.Config {
	if c == nil {
		c = &tls.Config{}
	}
	c = c.Clone()
	c.MinVersion = tls.VersionTLS13
	c.NextProtos = []string{ALPN}
	return c
}

// Reply writes resp on a server stream and closes the stream's write side:
// the end of a unary answer or of a streaming one.
func Reply(str *quic.Stream, resp *Response) error {
	if err := WriteResponse(str, resp); err != nil {
		abort(str, StreamCanceled)
		return err
	}
	return str.Close()
}

// EndStream finishes the server's side of str; defer it in every stream
// handler. quic-go retires a stream (and gives the client its stream
// credit back) only when both directions are finished: it closes the write
// side, which is a no-op after Reply and is what completes a stream the
// client cancelled, and stops reading whatever was not read.
func EndStream(str *quic.Stream) {
	_ = str.Close()
	str.CancelRead(StreamDone)
}

// Reject answers a request that failed (it could not be read, or was
// refused before any frame was sent) with err's code and message, stops
// reading whatever the client still sends, and ends the stream.
func Reject(str *quic.Stream, err error) {
	str.CancelRead(StreamMalformed)
	_ = Reply(str, ErrorResponse(err))
}

// Hello performs the protocol handshake every connection starts with and
// returns the server's answer. It fails with ErrVersion when the server
// speaks another protocol version. When the answer has FeatureMux (and
// conn's Config did not DisableMux), RoundTrip uses the mux stream from
// then on.
func Hello(ctx context.Context, conn *Conn, clientName string) (*Response, error) {
	resp, err := RoundTrip(ctx, conn, &Request{Type: MsgHello, ProtocolVersion: ProtocolVersion, ClientName: clientName})
	if err != nil {
		return nil, err
	}
	if err := resp.Err(); err != nil {
		return nil, err
	}
	if resp.ProtocolVersion != ProtocolVersion {
		return nil, fmt.Errorf("%w: server speaks %d, client %d", ErrVersion, resp.ProtocolVersion, ProtocolVersion)
	}
	if resp.Features&FeatureMux != 0 && !conn.noMux {
		conn.mux.CompareAndSwap(nil, newMux(conn))
	}
	return resp, nil
}

// CheckHello is the server's check of a Hello request: nil when the
// client speaks this protocol version, else an error wrapping ErrVersion
// (answer it with ErrorResponse, then close with ConnVersion).
func CheckHello(req *Request) error {
	if req.Type != MsgHello {
		return fmt.Errorf("%w: first request must be Hello, got %v", ErrVersion, req.Type)
	}
	if req.ProtocolVersion != ProtocolVersion {
		return fmt.Errorf("%w: client speaks %d, server %d", ErrVersion, req.ProtocolVersion, ProtocolVersion)
	}
	return nil
}
