package client

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/latch-io/latch/session"
)

// DefaultEndpoint is where latchd listens for clients by default.
const DefaultEndpoint = "127.0.0.1:7420"

// Config configures a Client. Zero fields take the defaults documented on
// them; start from DefaultConfig or a literal.
type Config struct {
	// Endpoints are the client (QUIC, UDP) addresses of cluster members,
	// host:port. Any member will do: the client follows redirects to the
	// leader. Default [DefaultEndpoint].
	Endpoints []string
	// TLS configures the connection: the CA that signed the members'
	// certificates and, for mutual TLS, the client certificate naming this
	// client's identity (session.ClientTLS builds one). nil trusts the
	// system roots and presents no certificate: nothing in the working
	// directory or environment changes what a program trusts. A config
	// with a ClientSessionCache (session.ClientTLS sets one) shares its
	// TLS session tickets with every client made from it; without one the
	// client keeps its own, so a reconnect to a member it met resumes.
	TLS *tls.Config
	// SessionTTL is the lease asked for the default session and for
	// NewSession calls with ttl 0. The server may clamp it. Default 10s.
	SessionTTL time.Duration
	// DialTimeout bounds one connection attempt: QUIC and TLS handshake,
	// Hello and resuming the sessions. Default 5s.
	DialTimeout time.Duration
	// FailureTimeout is how long the leader may stay silent while a call
	// waits on it (a request in flight, a lock wait, a watch) before the
	// client gives the member up and looks for the leader again; the
	// client pings after a quarter of it without an answer. Lower notices
	// a dead leader sooner and costs more pings (about four per
	// FailureTimeout per waiting connection, each answered). A member
	// whose QUIC stack still acknowledges the pings while their answers
	// are late is busy, not dead, and gets ten times FailureTimeout.
	// Default 300ms.
	FailureTimeout time.Duration
	// IdleFailureTimeout is how long a connection on which nothing waits
	// (sessions and held locks only) may stay silent before the client
	// gives the member up; QUIC pings after a third of it, when no
	// keepalive went by. Sessions renew at TTL/3, and a waiting renewal
	// is watched with FailureTimeout, so this bounds the detection of a
	// dead leader only for a connection without sessions. The member
	// drops a silent client after two thirds of it. Default 10s; at least
	// FailureTimeout.
	IdleFailureTimeout time.Duration
	// MaxRedirects bounds how many times one request or connection
	// attempt follows a "not the leader" answer naming the same leader
	// (a redirect loop) before giving up; a new leader starts a new
	// count. Default 5.
	MaxRedirects int
	// ReconnectGrace is how long past a session's grace (one TTL after its
	// lease ran out without an ack) the client goes on resuming it while
	// the cluster answers but has not taken it back: the leader refuses it
	// for load, or an election or a new leader's load is running. The
	// cluster holds such sessions for up to its members'
	// --max-reconnect-grace after a leader change, so a client that gave
	// up sooner would lose a session the cluster kept for it. Default 45s
	// (latchd's default); a client that hears nothing from the cluster
	// gives up after the plain grace.
	ReconnectGrace time.Duration
	// MinBackoff and MaxBackoff bound the pause between rounds of
	// connection attempts over all endpoints: it doubles from MinBackoff up
	// to MaxBackoff, each pause jittered. Defaults 20ms and 1s.
	MinBackoff, MaxBackoff time.Duration
	// ReadEndpoints are the members (client addresses, host:port) that
	// answer this client's Stale reads, watches and Stale lock-queue
	// reads, nearest first: the client keeps a second connection to the
	// first one that answers. Empty: the member that answers a probe
	// fastest among those that are not the leader (followers and
	// learners, from Endpoints and the cluster's member list), else the
	// leader. Writes and linearizable reads always go to the leader.
	ReadEndpoints []string
	// LeaderReads sends Stale reads and watches to the leader, on the one
	// connection, as every other call (no second connection).
	LeaderReads bool
	// CacheNodes caps the nodes the client cache holds (Cached reads):
	// beyond it Cached reads are answered by the leader without caching
	// until invalidations free room. Default 4096.
	CacheNodes int
	// ClientName is sent to the server for its logs. Default the program's
	// name.
	ClientName string
	// Logger receives the client's logs (reconnections, expiries). Default:
	// discard.
	Logger *slog.Logger
}

// DefaultConfig returns a Config with every default filled in.
func DefaultConfig() Config {
	return Config{
		Endpoints:          []string{DefaultEndpoint},
		SessionTTL:         10 * time.Second,
		DialTimeout:        5 * time.Second,
		FailureTimeout:     300 * time.Millisecond,
		IdleFailureTimeout: 10 * time.Second,
		MaxRedirects:       5,
		ReconnectGrace:     45 * time.Second,
		MinBackoff:         20 * time.Millisecond,
		MaxBackoff:         time.Second,
		CacheNodes:         4096,
		ClientName:         filepath.Base(os.Args[0]),
		Logger:             slog.New(slog.DiscardHandler),
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if len(c.Endpoints) == 0 {
		c.Endpoints = d.Endpoints
	}
	if c.SessionTTL == 0 {
		c.SessionTTL = d.SessionTTL
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = d.DialTimeout
	}
	if c.FailureTimeout == 0 {
		c.FailureTimeout = d.FailureTimeout
	}
	if c.IdleFailureTimeout == 0 {
		c.IdleFailureTimeout = max(d.IdleFailureTimeout, c.FailureTimeout)
	}
	if c.MaxRedirects == 0 {
		c.MaxRedirects = d.MaxRedirects
	}
	if c.ReconnectGrace == 0 {
		c.ReconnectGrace = d.ReconnectGrace
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = d.MinBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = max(d.MaxBackoff, c.MinBackoff)
	}
	if c.CacheNodes == 0 {
		c.CacheNodes = d.CacheNodes
	}
	if c.ClientName == "" {
		c.ClientName = d.ClientName
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	return c
}

// Validate rejects a config that cannot work, naming the field. Zero
// fields are fine: they take defaults.
func (c Config) Validate() error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrBadConfig, field, fmt.Sprintf(format, a...))
	}
	for _, e := range c.Endpoints {
		host, port, err := net.SplitHostPort(e)
		if err != nil {
			return bad("Endpoints", "%q is not host:port: %v", e, err)
		}
		if host == "" || port == "" || port == "0" {
			return bad("Endpoints", "%q needs a host and a port", e)
		}
	}
	for _, e := range c.ReadEndpoints {
		if _, _, err := net.SplitHostPort(e); err != nil {
			return bad("ReadEndpoints", "%q is not host:port: %v", e, err)
		}
	}
	switch {
	case c.CacheNodes < 0:
		return bad("CacheNodes", "%d is negative", c.CacheNodes)
	case c.SessionTTL < 0:
		return bad("SessionTTL", "%v is negative", c.SessionTTL)
	case c.SessionTTL > 0 && c.SessionTTL < 3*time.Millisecond:
		return bad("SessionTTL", "%v leaves no time for keepalives", c.SessionTTL)
	case c.DialTimeout < 0:
		return bad("DialTimeout", "%v is negative", c.DialTimeout)
	case c.FailureTimeout < 0:
		return bad("FailureTimeout", "%v is negative", c.FailureTimeout)
	case c.FailureTimeout > 0 && c.FailureTimeout < 30*time.Millisecond:
		return bad("FailureTimeout", "%v is below 30ms: QUIC would drop healthy connections", c.FailureTimeout)
	case c.IdleFailureTimeout < 0:
		return bad("IdleFailureTimeout", "%v is negative", c.IdleFailureTimeout)
	case c.IdleFailureTimeout > 0 && c.IdleFailureTimeout < max(c.FailureTimeout, 30*time.Millisecond):
		return bad("IdleFailureTimeout", "%v is below FailureTimeout %v (or 30ms)", c.IdleFailureTimeout, c.FailureTimeout)
	case c.MaxRedirects < 0:
		return bad("MaxRedirects", "%d is negative", c.MaxRedirects)
	case c.ReconnectGrace < 0:
		return bad("ReconnectGrace", "%v is negative", c.ReconnectGrace)
	case c.MinBackoff < 0:
		return bad("MinBackoff", "%v is negative", c.MinBackoff)
	case c.MaxBackoff < 0:
		return bad("MaxBackoff", "%v is negative", c.MaxBackoff)
	case c.MaxBackoff > 0 && c.MaxBackoff < c.MinBackoff:
		return bad("MaxBackoff", "%v is below MinBackoff %v", c.MaxBackoff, c.MinBackoff)
	}
	return nil
}

// tlsConfig returns cfg.TLS, or the system roots without a certificate,
// with a session cache.
func (c Config) tlsConfig() (*tls.Config, error) {
	if c.TLS == nil {
		return session.ClientTLS("", "", "")
	}
	if c.TLS.ClientSessionCache != nil {
		return c.TLS, nil
	}
	t := c.TLS.Clone()
	t.ClientSessionCache = session.NewTicketCache()
	return t, nil
}
