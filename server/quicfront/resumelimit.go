package quicfront

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latch-io/latch/session"
)

// Failed session resumes (a wrong secret, or a certificate of another
// identity) are rate-limited per connection and per client host, so that
// guessing secrets costs a connection, and soon a TLS handshake, per few
// guesses instead of being free at 16,000 a second. Only failures take
// tokens, and a resume is checked before any limit that would refuse it
// on the host's account: a client that resumes with its own secret is
// never slowed, whatever its neighbours on the host do.
//
//   - A connection may fail connResumeBurst resumes, then one a second. A
//     connection out of tokens has every resume refused before the
//     session is even looked up (a real client does not fail five times
//     on one connection).
//   - A host may fail Config.MaxFailedResumesPerHost a second (a burst of
//     twice that). A failure that finds its host out of tokens is refused
//     by the limiter, and empties its connection's tokens: from then on
//     each guess from that host needs a new connection.
//
// Refusals are ErrBadSecret (the resume failed) whose message names the
// limit, and are counted in latch_resume_refused_total.
const (
	connResumeBurst = 5
	connResumeRate  = 1 // per second
	// hostsSweepAt is when the table of hosts is first swept of those
	// whose tokens are full again (it then grows only with hosts that
	// failed within the last few seconds).
	hostsSweepAt = 1024
)

// DefaultMaxFailedResumesPerHost is Config.MaxFailedResumesPerHost's
// default (the member's Config field of that name).
const DefaultMaxFailedResumesPerHost = 10

// tokens is a token bucket: it holds at most burst, and gains rate a
// second.
type tokens struct {
	n    float64
	last time.Duration
}

// take refills t to now and takes one token; it reports false, taking
// nothing, when there is none.
func (t *tokens) take(now time.Duration, rate, burst float64) bool {
	t.refill(now, rate, burst)
	if t.n < 1 {
		return false
	}
	t.n--
	return true
}

func (t *tokens) refill(now time.Duration, rate, burst float64) {
	if now > t.last {
		t.n = min(burst, t.n+rate*(now-t.last).Seconds())
		t.last = now
	}
}

// resumeLimiter holds the tokens of connections and hosts.
type resumeLimiter struct {
	now      func() time.Duration // monotonic; a test may replace it
	hostRate float64

	mu      sync.Mutex
	hosts   map[string]*tokens
	sweepAt int

	failures    atomic.Uint64 // failed resumes seen, refused or not
	refusedConn atomic.Uint64
	refusedHost atomic.Uint64
}

func newResumeLimiter(perHost int, now func() time.Duration) *resumeLimiter {
	return &resumeLimiter{now: now, hostRate: float64(perHost), hosts: map[string]*tokens{}, sweepAt: hostsSweepAt}
}

// connResumes is a connection's failed-resume tokens, guarded by the
// limiter's lock. A new connection starts with a full burst.
type connResumes struct {
	t       tokens
	started bool
}

func (c *connResumes) bucket(now time.Duration) *tokens {
	if !c.started {
		c.t, c.started = tokens{n: connResumeBurst, last: now}, true
	}
	return &c.t
}

// allow refuses a resume on c before it is looked at, when c has failed
// too many already.
func (l *resumeLimiter) allow(c *Conn) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := c.resumes.bucket(now)
	if b.refill(now, connResumeRate, connResumeBurst); b.n >= 1 {
		return nil
	}
	l.refusedConn.Add(1)
	return fmt.Errorf("%w: resume refused: too many failed resumes on this connection (%d, then %d a second)",
		session.ErrBadSecret, connResumeBurst, connResumeRate)
}

// failed records a failed resume of session id on c and returns the error
// to answer: ErrBadSecret, naming the limit when the limiter refused it.
func (l *resumeLimiter) failed(c *Conn, id uint64) error {
	l.failures.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	burst := 2 * l.hostRate
	h := l.hosts[c.host]
	if h == nil {
		l.sweepLocked(now, burst)
		h = &tokens{n: burst, last: now}
		l.hosts[c.host] = h
	}
	conn := c.resumes.bucket(now)
	if !h.take(now, l.hostRate, burst) {
		conn.n = 0 // every further guess from this host needs a new connection
		l.refusedHost.Add(1)
		return fmt.Errorf("%w: session %d: resume refused: too many failed resumes from host %s (%g a second, latchd --%s)",
			session.ErrBadSecret, id, c.host, l.hostRate, flagFailedResumes)
	}
	conn.take(now, connResumeRate, connResumeBurst)
	return fmt.Errorf("%w: session %d", session.ErrBadSecret, id)
}

// sweepLocked drops hosts whose tokens are full again once the table
// reached sweepAt, then waits for it to double.
func (l *resumeLimiter) sweepLocked(now time.Duration, burst float64) {
	if len(l.hosts) < l.sweepAt {
		return
	}
	for host, t := range l.hosts {
		if t.refill(now, l.hostRate, burst); t.n >= burst {
			delete(l.hosts, host)
		}
	}
	l.sweepAt = max(hostsSweepAt, 2*len(l.hosts))
}

// flagFailedResumes is the latchd flag of Config.MaxFailedResumesPerHost.
const flagFailedResumes = "max-failed-resumes-per-host"
