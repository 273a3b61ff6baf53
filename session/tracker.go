package session

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/latch-io/latch/namespace"
)

// State is the client's knowledge of its session lease.
type State uint8

// Tracker states. Connected and Reconnected mean the lease is known to be
// alive; Jeopardy means it may have ended and the client is trying to reach
// a leader; Expired is final.
const (
	StateConnected   State = iota + 1 // lease alive since the session opened
	StateJeopardy                     // lease end passed with no newer ack: the session may be dead
	StateReconnected                  // an ack ended a jeopardy: the session survived
	StateExpired                      // the session is gone; Done is closed
)

var stateNames = [...]string{
	StateConnected:   "connected",
	StateJeopardy:    "jeopardy",
	StateReconnected: "reconnected",
	StateExpired:     "expired",
}

// String returns the state's lower-case name.
func (s State) String() string {
	if int(s) < len(stateNames) && stateNames[s] != "" {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Live reports whether the lease is known to be alive in state s.
func (s State) Live() bool { return s == StateConnected || s == StateReconnected }

// eventBuffer is how many transitions Events holds for a slow reader
// before the oldest are dropped.
const eventBuffer = 16

// Tracker is the client's view of its session lease, from the keepalives it
// sent and the acks it got. A keepalive sent at time s and acknowledged
// with TTL d proves the server renewed the lease at or after s, so the
// lease lasts at least until s+d (Deadline). Past that without a newer ack
// the tracker is in jeopardy; it keeps the session for a grace period of
// one TTL while the client looks for a leader, and then declares it
// expired. The server saying so expires it at once.
//
// A client that hears from the cluster but is not yet taken back (the
// leader refuses it for load, or an election or a new leader's load is
// still running) calls Hold: the server holds its sessions meanwhile
// (a new leader's reconnect grace, server/lease), so the grace runs
// on for one TTL after the last such word, up to Hold's limit past the
// grace. A client that hears nothing keeps the plain grace.
//
// The tracker does not run timers: the client's keepalive loop calls Poll
// at NextCheck (State, Deadline and the others poll too). Safe for
// concurrent use.
type Tracker struct {
	clock  Clock
	events chan State
	done   chan struct{}

	mu       sync.Mutex
	state    State
	leaseEnd time.Time
	grace    time.Duration
	held     time.Time // no expiry for want of an ack before this (Hold)
	heard    time.Time // the last Hold: when the cluster last answered
	lastSent time.Time
	err      error
}

// NewTracker starts tracking a session opened by a request sent at sentAt
// and granted ttl: it is Connected with the lease ending at sentAt+ttl.
func NewTracker(clock Clock, sentAt time.Time, ttl time.Duration) *Tracker {
	return &Tracker{
		clock:    clock,
		events:   make(chan State, eventBuffer),
		done:     make(chan struct{}),
		state:    StateConnected,
		leaseEnd: sentAt.Add(ttl),
		grace:    ttl,
		lastSent: sentAt,
	}
}

// Sent records that a keepalive (or resume) left at time at.
func (t *Tracker) Sent(at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if at.After(t.lastSent) {
		t.lastSent = at
	}
	t.pollLocked()
}

// Acked records the server's ack of the keepalive (or resume) sent at
// sentAt, granting ttl: the lease lasts until at least sentAt+ttl. An ack
// that brings the lease end past now ends a jeopardy (Reconnected). Acks
// after expiry are ignored.
func (t *Tracker) Acked(sentAt time.Time, ttl time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pollLocked()
	if t.state == StateExpired {
		return
	}
	if end := sentAt.Add(ttl); end.After(t.leaseEnd) {
		t.leaseEnd = end
	}
	t.grace = ttl
	if t.state == StateJeopardy && t.clock.Now().Before(t.leaseEnd) {
		t.setLocked(StateReconnected)
	}
}

// Hold records that the cluster answered at now and the client is still
// trying to be taken back (it may be refused for load, an election or a
// new leader's load may be running): the session is not declared expired
// for want of an ack before now plus the grace (or window, if longer: one
// connection attempt's length), nor, whatever Hold is told, later than
// limit past the end of the plain grace. limit is the longest the cluster
// may hold a session it has not heard from (the members'
// --max-reconnect-grace).
func (t *Tracker) Hold(now time.Time, window, limit time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state == StateExpired {
		return
	}
	until := now.Add(max(t.grace, window))
	if most := t.leaseEnd.Add(t.grace + limit); until.After(most) {
		until = most
	}
	if until.After(t.held) {
		t.held = until
	}
	if now.After(t.heard) {
		t.heard = now
	}
}

// Expire ends the session because the server said it is gone (see
// IsExpiry) or the application gave up; cause is kept in Err.
func (t *Tracker) Expire(cause error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expireLocked(cause)
}

// IsExpiry reports whether a server error means the session no longer
// exists, so the tracker must Expire.
func IsExpiry(err error) bool {
	return errors.Is(err, ErrSessionExpired) || errors.Is(err, ErrUnknownSession) || errors.Is(err, namespace.ErrNoSession)
}

// Poll applies the transitions due by now and returns the state.
func (t *Tracker) Poll() State {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pollLocked()
	return t.state
}

// State is Poll.
func (t *Tracker) State() State { return t.Poll() }

// NextCheck is when the next time-driven transition is due (lease end, or
// the end of the grace period); ok is false once expired.
func (t *Tracker) NextCheck() (at time.Time, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pollLocked()
	switch t.state {
	case StateExpired:
		return time.Time{}, false
	case StateJeopardy:
		return t.expiryLocked(), true
	}
	return t.leaseEnd, true
}

// Deadline is the end of the lease as far as the client can prove it is
// alive. A lock grant that arrives after Deadline must not be reported as
// held: the session may have died before it.
func (t *Tracker) Deadline() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.leaseEnd
}

// LastSent is when the newest recorded keepalive left.
func (t *Tracker) LastSent() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lastSent
}

// Events delivers each transition's new state in order. It holds the
// latest transitions; when its reader falls behind the oldest are dropped,
// so the last value received is always the current state. It is closed
// after StateExpired.
func (t *Tracker) Events() <-chan State { return t.events }

// Done is closed when the session expires.
func (t *Tracker) Done() <-chan struct{} { return t.done }

// Err is nil until the session expires, then an error wrapping
// ErrSessionExpired (and the cause given to Expire, if any).
func (t *Tracker) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pollLocked()
	return t.err
}

func (t *Tracker) pollLocked() {
	if t.state == StateExpired {
		return
	}
	now := t.clock.Now()
	if t.state != StateJeopardy && !now.Before(t.leaseEnd) {
		t.setLocked(StateJeopardy)
	}
	if t.state == StateJeopardy && !now.Before(t.expiryLocked()) {
		heard := "the cluster did not answer since the lease ended"
		if !t.heard.IsZero() {
			heard = fmt.Sprintf("the cluster last answered %v before", now.Sub(t.heard).Round(time.Millisecond))
		}
		t.expireLocked(fmt.Errorf("no ack from a leader within the grace period of %v after the lease ended (%s)", t.expiryLocked().Sub(t.leaseEnd).Round(time.Millisecond), heard))
	}
}

// expiryLocked is when the session is declared expired without an ack:
// the end of the grace, or of a Hold.
func (t *Tracker) expiryLocked() time.Time {
	end := t.leaseEnd.Add(t.grace)
	if t.held.After(end) {
		return t.held
	}
	return end
}

func (t *Tracker) expireLocked(cause error) {
	if t.state == StateExpired {
		return
	}
	switch {
	case cause == nil:
		t.err = ErrSessionExpired
	case errors.Is(cause, ErrSessionExpired):
		t.err = cause
	default:
		t.err = fmt.Errorf("%w: %w", ErrSessionExpired, cause)
	}
	t.setLocked(StateExpired)
	close(t.done)
	close(t.events)
}

// setLocked moves to s and publishes it without ever blocking: when the
// buffer is full the oldest transition makes room.
func (t *Tracker) setLocked(s State) {
	t.state = s
	for {
		select {
		case t.events <- s:
			return
		default:
		}
		select {
		case <-t.events:
		default:
		}
	}
}
