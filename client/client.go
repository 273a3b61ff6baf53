package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latch-io/latch/session"
)

// Client is a connection to a latch cluster: one QUIC connection to the
// leader at a time, the sessions it carries and their keepalives, and the
// watches opened through it. It is safe for concurrent use. Close it when
// done.
type Client struct {
	cfg  Config
	log  *slog.Logger
	tls  *tls.Config
	tcfg session.Config

	// ctx ends when Close is called; every internal wait selects on it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	cur      *link         // nil while (re)connecting
	ready    chan struct{} // closed when cur is set; replaced when cur drops
	hint     string        // address the next connect tries first (a redirect)
	lastErr  error         // why the last connection attempt failed
	fatal    error         // set while no retry can connect (discover.go): waiting calls fail with it
	linked   bool          // a link was published once
	sessions map[uint64]*Session
	def      *Session
	closed   bool

	kaWake chan struct{} // wakes the keepalive loop; buffered 1
	locks  *lockFollower // the held locks (lockfollow.go)

	seen  atomic.Uint64 // the highest revision seen in any answer (readlink.go)
	rd    readRouter    // the read connection (readlink.go)
	cache *clientCache  // the client cache (cache.go)
}

// Dial connects to the cluster named by cfg and opens the default session
// (cfg.SessionTTL). It returns when both are done, or fails when ctx ends
// first, or at once when cfg is invalid. The client keeps itself connected
// until Close: it follows the leader and fails over on its own.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	tlsConf, err := cfg.tlsConfig()
	if err != nil {
		return nil, fmt.Errorf("latch: dial: %w", err)
	}
	c := &Client{
		cfg:      cfg,
		log:      cfg.Logger,
		tls:      tlsConf,
		tcfg:     transportConfig(cfg.FailureTimeout, cfg.IdleFailureTimeout),
		ready:    make(chan struct{}),
		sessions: make(map[uint64]*Session),
		kaWake:   make(chan struct{}, 1),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.locks = newLockFollower(c)
	c.cache = newClientCache(c, cfg.CacheNodes)
	c.wg.Add(2)
	go c.connectLoop()
	go c.keepaliveLoop()
	s, err := c.NewSession(ctx, cfg.SessionTTL)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.mu.Lock()
	c.def = s
	c.mu.Unlock()
	return c, nil
}

// transportConfig makes the connection notice a silent member within
// failure while a call waits on it (session.Config.FailureTimeout: pings
// are QUIC datagrams the member echoes, sent only then), and within idle
// otherwise: QUIC pings the member when it heard nothing for a third of
// idle and closes the connection when, after that ping, it heard nothing
// for the other two thirds (quic-go starts the idle timer at the first
// ack-eliciting packet sent after the last one received). The member
// negotiates the same idle timeout, so it drops a silent client as fast.
// A member that does not answer a handshake for three times failure (at
// least a second: a loaded member may be slow to start one) is skipped.
func transportConfig(failure, idle time.Duration) session.Config {
	ping := idle / 3
	return session.Config{
		FailureTimeout:   failure,
		MaxIdleTimeout:   idle - ping,
		KeepAlivePeriod:  ping,
		HandshakeTimeout: max(3*failure, time.Second),
	}
}

// Session returns the default session opened by Dial: Client calls that
// need a session (ephemeral creates) use it. It is not replaced when it
// ends; open another with NewSession.
func (c *Client) Session() *Session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.def
}

// Member returns the id of the member the client is connected to (the
// leader, as far as the client knows), or "" while it (re)connects.
func (c *Client) Member() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		return ""
	}
	return c.cur.server
}

// owner is the session Client.Set, Delete and Multi act as: the default
// session while it lives, so the client may change and delete the
// ephemeral nodes it made (only their session may, or an admin); nil
// after it ended, when those nodes are gone anyway.
func (c *Client) owner() *Session {
	s := c.Session()
	if s == nil || s.usable() != nil {
		return nil
	}
	return s
}

// Endpoints returns the configured endpoints.
func (c *Client) Endpoints() []string { return append([]string(nil), c.cfg.Endpoints...) }

// Close closes every session the client still keeps alive (their
// ephemeral nodes vanish; Orphan a session first to leave it to expire),
// ends every watch, closes the connection and stops every goroutine.
// Closing sessions is bounded by DialTimeout. Calling Close again does
// nothing.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	live := make([]*Session, 0, len(c.sessions))
	for _, s := range c.sessions {
		live = append(live, s)
	}
	connected := c.cur != nil
	c.mu.Unlock()

	// Only an established connection is worth waiting for: with none, the
	// sessions are left to expire rather than holding Close for a timeout.
	if connected && len(live) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.DialTimeout)
		var wg sync.WaitGroup
		for _, s := range live {
			wg.Go(func() { _ = s.Close(ctx) })
		}
		wg.Wait()
		cancel()
	}
	for _, s := range live {
		s.finish(ErrClosed)
	}
	// Cancelling under mu orders it with goFunc: no goroutine is added
	// once Wait may have begun.
	c.mu.Lock()
	c.cancel()
	c.mu.Unlock()
	c.wg.Wait()
	return nil
}

// Closed returns a channel closed when Close has been called.
func (c *Client) Closed() <-chan struct{} { return c.ctx.Done() }

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// goFunc runs f as a goroutine that Close waits for, or reports false
// when the client is closed.
func (c *Client) goFunc(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx.Err() != nil {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}
