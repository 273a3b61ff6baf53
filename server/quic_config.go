package server

import (
	"fmt"
	"time"

	"github.com/latch-io/latch/server/watch"
	"github.com/latch-io/latch/session"
)

// Client-front defaults (see the Config fields of the same names).
const (
	DefaultMaxSessionsPerIdentity = 16384
	DefaultExpiryBatch            = 256
	DefaultExpiryTick             = 500 * time.Millisecond
	DefaultWatchHistory           = 100000
	DefaultWatchBuffer            = 1024
	DefaultMaxWatchesPerConn      = 1024
	DefaultMaxRequestsPerConn     = 4096
	DefaultMaxConns               = 16384
	DefaultMaxStreams             = 16384
	DefaultMaxWatchBacklogBytes   = 64 << 20
	DefaultMaxWatchBytesPerConn   = 16 << 20
	DefaultIdleConnTimeout        = 2 * time.Minute
)

// watchWriteTimeout bounds how long a watch waits for its client to take
// one frame: a client that stops reading its watches gets them cut (the
// stream is reset) instead of holding their events and goroutines.
const watchWriteTimeout = 30 * time.Second

// DefaultRequestReadTimeout is Config.RequestReadTimeout's default.
const DefaultRequestReadTimeout = 10 * time.Second

// devTLSDir is where Dev keeps its development PKI (CA, member and server
// certificates), under DataDir. The CLI looks for ./latch-data/tls/ca.pem
// next to `latchd --dev` and issues itself a client certificate there.
const devTLSDir = "tls"

// frontDefaults fills the client-front fields of cfg left zero.
func frontDefaults(cfg *Config) {
	setIfZero(&cfg.MaxSessionsPerIdentity, DefaultMaxSessionsPerIdentity)
	setIfZero(&cfg.MaxSessions, DefaultMaxSessions)
	setIfZero(&cfg.MaxAnonymousSessions, DefaultMaxAnonymousSessions)
	setIfZero(&cfg.MaxWatchesPerIdentity, DefaultMaxWatchesPerIdentity)
	setIfZero(&cfg.ExpiryBatch, DefaultExpiryBatch)
	setIfZero(&cfg.ExpiryTick, DefaultExpiryTick)
	setIfZero(&cfg.WatchHistory, DefaultWatchHistory)
	setIfZero(&cfg.WatchBuffer, DefaultWatchBuffer)
	setIfZero(&cfg.MaxWatchesPerConn, DefaultMaxWatchesPerConn)
	setIfZero(&cfg.MaxRequestsPerConn, DefaultMaxRequestsPerConn)
	setIfZero(&cfg.APIMaxRequests, DefaultAPIMaxRequests)
	setIfZero(&cfg.APIMaxWatches, DefaultAPIMaxWatches)
	setIfZero(&cfg.MaxConns, DefaultMaxConns)
	setIfZero(&cfg.MaxStreams, DefaultMaxStreams)
	setIfZero(&cfg.MaxWatchBacklogBytes, DefaultMaxWatchBacklogBytes)
	setIfZero(&cfg.MaxWatchBytesPerConn, DefaultMaxWatchBytesPerConn)
	setIfZero(&cfg.MaxFailedResumesPerHost, DefaultMaxFailedResumesPerHost)
	setIfZero(&cfg.IdleConnTimeout, DefaultIdleConnTimeout)
	setIfZero(&cfg.RequestReadTimeout, DefaultRequestReadTimeout)
	cfg.Admission.FillDefaults()
	setIfZero(&cfg.MaxReconnectGrace, DefaultMaxReconnectGrace)
	// Fill the transport's defaults here too, so the front reads real
	// values (the handshake timeout bounds the wait for Hello).
	def := session.DefaultConfig()
	setIfZero(&cfg.Transport.MaxFrameSize, def.MaxFrameSize)
	setIfZero(&cfg.Transport.MaxIncomingStreams, def.MaxIncomingStreams)
	setIfZero(&cfg.Transport.KeepAlivePeriod, def.KeepAlivePeriod)
	setIfZero(&cfg.Transport.MaxIdleTimeout, def.MaxIdleTimeout)
	setIfZero(&cfg.Transport.HandshakeTimeout, def.HandshakeTimeout)
}

// validateFront checks the client-front fields of c.
func (c *Config) validateFront() error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrBadConfig, field, fmt.Sprintf(format, a...))
	}
	if err := c.Admission.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrBadConfig, err)
	}
	switch {
	case !c.Dev && c.TLSCert == "" && c.MemberCert == "":
		return bad("TLSCert", "required unless Dev or MemberCert (clients always speak TLS 1.3)")
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return bad("TLSKey", "TLSCert and TLSKey go together")
	case c.TLSClientCA != "" && c.TLSCert == "" && c.MemberCert == "" && !c.Dev:
		return bad("TLSClientCA", "needs TLSCert and TLSKey")
	case c.MaxReconnectGrace < 0:
		return bad("MaxReconnectGrace", "%v is negative", c.MaxReconnectGrace)
	case c.MaxSessionsPerIdentity < 1:
		return bad("MaxSessionsPerIdentity", "%d must be at least 1", c.MaxSessionsPerIdentity)
	case c.MaxSessions < 1:
		return bad("MaxSessions", "%d must be at least 1", c.MaxSessions)
	case c.MaxAnonymousSessions < 1:
		return bad("MaxAnonymousSessions", "%d must be at least 1", c.MaxAnonymousSessions)
	case c.MaxWatchesPerIdentity < 1:
		return bad("MaxWatchesPerIdentity", "%d must be at least 1", c.MaxWatchesPerIdentity)
	case c.ExpiryBatch < 1:
		return bad("ExpiryBatch", "%d must be at least 1", c.ExpiryBatch)
	case c.ExpiryTick < time.Millisecond:
		return bad("ExpiryTick", "%v is below 1ms", c.ExpiryTick)
	case c.WatchHistory < 1:
		return bad("WatchHistory", "%d must be at least 1", c.WatchHistory)
	case c.WatchBuffer < 1:
		return bad("WatchBuffer", "%d must be at least 1", c.WatchBuffer)
	case c.MaxRequestsPerConn < 2:
		return bad("MaxRequestsPerConn", "%d must be at least 2", c.MaxRequestsPerConn)
	case c.MaxWatchesPerConn < 1 || c.MaxWatchesPerConn >= c.MaxRequestsPerConn:
		return bad("MaxWatchesPerConn", "%d must be in [1, MaxRequestsPerConn %d)", c.MaxWatchesPerConn, c.MaxRequestsPerConn)
	case c.MaxConns < 1:
		return bad("MaxConns", "%d must be at least 1", c.MaxConns)
	case c.MaxStreams < 1:
		return bad("MaxStreams", "%d must be at least 1", c.MaxStreams)
	case c.MaxWatchBacklogBytes < watch.MinCapBytes:
		return bad("MaxWatchBacklogBytes", "%d must be at least %d (one frame of long paths)", c.MaxWatchBacklogBytes, watch.MinCapBytes)
	case c.MaxFailedResumesPerHost < 1:
		return bad("MaxFailedResumesPerHost", "%d must be at least 1", c.MaxFailedResumesPerHost)
	case c.MaxWatchBytesPerConn < watch.MinCapBytes:
		return bad("MaxWatchBytesPerConn", "%d must be at least %d (one frame of long paths)", c.MaxWatchBytesPerConn, watch.MinCapBytes)
	case c.IdleConnTimeout < 0:
		return bad("IdleConnTimeout", "%v is negative", c.IdleConnTimeout)
	case c.RequestReadTimeout < 0:
		return bad("RequestReadTimeout", "%v is negative", c.RequestReadTimeout)
	}
	if err := c.Transport.Validate(); err != nil {
		return bad("Transport", "%v", err)
	}
	return nil
}
