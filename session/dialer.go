package session

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
)

// Dialer is one client UDP socket and the QUIC transport on it: a client
// asks a member for admission (a probe with an Ask) and then dials it from
// the same source address, which is what the member's reservation is
// held for (see the probe's wire description). Dial hands the socket to
// the connection: it closes when the connection ends. A Dialer serves one
// connection; Close releases it when no connection was made.
type Dialer struct {
	udp  *net.UDPConn
	tr   *quic.Transport
	once sync.Once
}

// NewDialer opens a socket on an ephemeral port.
func NewDialer() (*Dialer, error) {
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4zero})
	if err != nil {
		return nil, fmt.Errorf("latch: dial socket: %w", err)
	}
	d := &Dialer{udp: udp, tr: &quic.Transport{Conn: udp}}
	// Start the transport and make it keep non-QUIC datagrams from now
	// on: quic-go drops them until a first ReadNonQUICPacket call, and a
	// probe answer may arrive before Probe reads.
	armed, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := d.tr.ReadNonQUICPacket(armed, nil); err != nil && armed.Err() == nil {
		d.Close()
		return nil, fmt.Errorf("latch: dial socket: %w", err)
	}
	return d, nil
}

// Close releases the socket (a no-op after a Dial succeeded: the
// connection owns it then, and closing it closes the socket).
func (d *Dialer) Close() error {
	var err error
	d.once.Do(func() {
		d.tr.Close()
		err = ignoreClosed(d.udp.Close())
	})
	return err
}

// Probe asks the member at addr who leads and, when ask says so, for
// admission, from d's socket, sending again every resend until ctx ends.
// The socket is not connected, so a port nobody listens on is silence
// here, not ErrRefused (use the package's Probe to tell them apart).
func (d *Dialer) Probe(ctx context.Context, addr string, ask Ask, resend time.Duration) (ProbeAnswer, error) {
	to, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return ProbeAnswer{}, err
	}
	send := func(req []byte) error {
		_, err := d.tr.WriteTo(req, to)
		return err
	}
	recv := func(buf []byte, until time.Time) (int, error) {
		rctx, cancel := context.WithDeadline(ctx, until)
		defer cancel()
		n, _, err := d.tr.ReadNonQUICPacket(rctx, buf)
		return n, err
	}
	return exchange(ctx, ask, resend, send, recv)
}

// Dial connects to a latch server at the UDP address addr from d's
// socket; see the package's Dial. On failure the socket is closed.
func (d *Dialer) Dial(ctx context.Context, addr string, tlsConf *tls.Config, cfg Config) (*Conn, error) {
	if err := cfg.Validate(); err != nil {
		d.Close()
		return nil, err
	}
	cfg = cfg.withDefaults()
	to, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("latch: dial %s: %w", addr, err)
	}
	tc := resumeAt(pinTLS(tlsConf), addr)
	if tc.ServerName == "" {
		// The name the address was given by (quic-go's DialAddr did the
		// same), not the address it resolved to.
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		tc.ServerName = host
	}
	start := time.Now()
	qc, err := d.tr.Dial(ctx, to, tc, ClientQUICConfig(cfg))
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("latch: dial %s: %w", addr, err)
	}
	context.AfterFunc(qc.Context(), func() { d.Close() })
	conn := &Conn{Conn: qc, maxFrame: cfg.MaxFrameSize, noMux: cfg.DisableMux}
	if cfg.FailureTimeout > 0 && qc.ConnectionState().SupportsDatagrams.Remote {
		conn.dog = newWatchdog(conn, cfg.FailureTimeout, time.Since(start))
		go conn.dog.run() // ends with the connection
	}
	return conn, nil
}
