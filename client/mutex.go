package client

import (
	"context"
	"fmt"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// Locks are the server's: a lock request is an ephemeral sequential node
// under the locked path, owned by a session, granted in revision order
// (FIFO across the whole hierarchy: a lock on /billing covers
// /billing/job-a). The recipes here are thin: Mutex and RWMutex hold one
// request each; Election is an exclusive lock whose request node holds
// the candidate's value.
//
// How a lock is acquired and kept:
//
//   - Lock sends a new request as MsgLockCall, a unary call on the
//     connection's mux stream, when the member serves it: a free lock
//     (the common case) is granted in the answer, at the cost of a set.
//     A request answered Queued is waited for like a re-attach (MsgLock
//     with Node, below) on a stream of its own. Members that do not serve
//     the call, and a Lock whose previous Lock had to wait (a contended
//     lock saves the call's round trip), send MsgLock, which waits on
//     its stream: Queued (the request node), then Granted (the fencing
//     token). ctx bounds the call and the wait; when it ends the call is
//     cancelled or the stream reset (the server withdraws the request if
//     the answer did not go out, or if it still waits) and the client
//     withdraws the request itself (MsgLockRelease by node, or by request
//     id), which releases the lock if the grant raced ctx's end: the
//     server ends the stream at the grant, so a grant written before the
//     reset reached it is one only the client knows it never delivered.
//     A grant is either returned by Lock or released, never left held by
//     a caller that gave up. While it waits, the deadline also travels as
//     the request's timeout, so the server withdraws it even if nothing
//     else reaches it.
//   - The server ends the stream at the grant: a held lock is not a
//     request in flight. It tells of the lock's end (lost, deleted, or
//     released by a request of another connection) on the connection's
//     one lock notices stream, which the client's lockFollower reads
//     (lockfollow.go): that closes Lost(). Lost() also closes when the
//     session ends (the follower watches each session that holds locks).
//     A held lock costs the client no goroutine.
//   - After a connection loss or a leader change the client re-attaches to
//     its request node (MsgLock with Node) on the new leader, keeping its
//     place in the queue, while waiting and while holding. Every Lock call
//     names its request with a random request id: when the request was
//     sent but its node never came back (the connection broke first), the
//     client sends it again with the same id and the server answers with
//     the request it already has. Nothing is guessed.
//   - A grant that arrives after the session's proven lease end
//     (Session.LeaseEnd) is refused with ErrLockLost and released: the
//     session may have expired in between (Jepsen found etcd handing out
//     locks after their lease died).

// LockMode is how a lock is held: LockExclusive or LockShared.
type LockMode = session.LockMode

// Lock modes.
const (
	LockExclusive = session.LockExclusive
	LockShared    = session.LockShared
)

// Sequencer names a held lock (path, mode, fencing token, session) so that
// a resource server can check it with Client.CheckSequencer, or compare
// tokens, before acting for the holder.
type Sequencer = session.Sequencer

// LockInfo describes one lock request as Client.LockQueue lists it.
type LockInfo = session.LockInfo

// LockOption modifies NewMutex, NewRWMutex and NewElection.
type LockOption interface{ applyLock(*lockOptions) }

type lockOptions struct {
	holdTTL   time.Duration
	lockDelay time.Duration // <0: none; 0: the server's default
	data      []byte
}

type holdTTLOption time.Duration

func (d holdTTLOption) applyLock(o *lockOptions) { o.holdTTL = time.Duration(d) }

// WithHoldTTL makes a granted lock expire d after its grant (or its last
// renewal) even while the session lives: a lease-per-lock. Lost() closes
// when it does. Renew restarts it. Default: held until released or the
// session ends.
func WithHoldTTL(d time.Duration) LockOption { return holdTTLOption(d) }

type lockDelayOption time.Duration

func (d lockDelayOption) applyLock(o *lockOptions) {
	o.lockDelay = time.Duration(d)
	if d <= 0 {
		o.lockDelay = -1
	}
}

// WithLockDelay sets how long the lock stays unavailable to others when
// this holder is lost without releasing it (its session expired, its hold
// TTL passed), so that a holder that was cut off can notice before anyone
// else acts; 0 turns lock-delay off. The server caps it (60s by default);
// without this option its default applies (5s).
func WithLockDelay(d time.Duration) LockOption { return lockDelayOption(d) }

func buildLock(opts []LockOption) lockOptions {
	var o lockOptions
	for _, opt := range opts {
		opt.applyLock(&o)
	}
	return o
}

func (o lockOptions) check() error {
	if o.holdTTL < 0 || (o.holdTTL > 0 && o.holdTTL < time.Millisecond) {
		return fmt.Errorf("%w: hold TTL %v", ErrBadOption, o.holdTTL)
	}
	return nil
}

func (o lockOptions) delayMillis() int64 {
	switch {
	case o.lockDelay < 0:
		return namespace.NoLockDelay
	case o.lockDelay == 0:
		return 0
	}
	return max(o.lockDelay.Milliseconds(), 1)
}

// Mutex is an exclusive lock on a path, held by a session. It is not
// re-entrant: locking a path the session already holds (or a path above
// or below it) fails with ErrWouldDeadlock. One Mutex holds at most one
// lock at a time; use one Mutex per goroutine that locks.
type Mutex struct{ h *lockHandle }

// NewMutex returns an exclusive lock on path for s. Nothing is sent until
// Lock.
func NewMutex(s *Session, path string, opts ...LockOption) *Mutex {
	return &Mutex{h: newLockHandle(s, path, LockExclusive, buildLock(opts))}
}

// Lock blocks until the lock is granted, ctx ends (the request is
// withdrawn and ctx's error returned) or the session ends. Locking again
// after Lost closed first lets go of the lost lock. Errors:
// ErrWouldDeadlock (the session holds or waits for a conflicting lock),
// ErrLockLost (granted too late to be trusted; the lock was released),
// ErrSessionExpired, ErrBadPath, ErrEphemeralParent.
func (m *Mutex) Lock(ctx context.Context) error { return m.h.acquire(ctx, false) }

// TryLock takes the lock only if it is granted at once (nobody holds a
// conflicting lock or waits for one before it, no lock-delay runs); else
// it fails with ErrLocked and leaves nothing queued.
func (m *Mutex) TryLock(ctx context.Context) error { return m.h.acquire(ctx, true) }

// Unlock releases the lock. It returns ErrNotHeld when the Mutex holds
// nothing, and the loss error (ErrLockLost, or the session's error) when
// the lock had been lost before.
func (m *Mutex) Unlock(ctx context.Context) error { return m.h.release(ctx) }

// Renew restarts the hold TTL of the held lock (see WithHoldTTL).
func (m *Mutex) Renew(ctx context.Context) error { return m.h.renew(ctx) }

// Token is the held lock's fencing token (0 when not held): it increases
// with every grant of this lock, so a resource can refuse older holders.
func (m *Mutex) Token() uint64 { return m.h.token() }

// Sequencer names the held lock for a resource server (zero Token when not
// held).
func (m *Mutex) Sequencer() Sequencer { return m.h.sequencer() }

// Lost is closed when the lock taken by the last successful Lock or
// TryLock is lost: the session ended, or the server took the lock away
// (hold TTL, node deleted). It is not closed by Unlock. Before the first
// Lock it returns nil (a channel that never closes).
func (m *Mutex) Lost() <-chan struct{} { return m.h.lostC() }

// Err says why Lost closed: nil while the lock is held or was released
// by Unlock.
func (m *Mutex) Err() error { return m.h.lostErr() }

// Contended is closed when another session waits for a lock that
// conflicts with the one taken by the last successful Lock or TryLock,
// while it is held: a request queued behind it, or already waiting when
// it was granted (Chubby's "conflicting lock request"), so the holder
// can finish early and Unlock. The first call starts a watch of the
// lock's events (Locks), which ends with the hold; before the first Lock
// it returns nil. See contended.go.
func (m *Mutex) Contended() <-chan struct{} { return m.h.contendedC() }

// Node is the held lock's request node ("" when not held): the ephemeral
// node `latch ls PATH` shows.
func (m *Mutex) Node() string { return m.h.nodeName() }

// Revision is the held request's revision (0 when not held): requests
// are served in revision order among those that conflict.
func (m *Mutex) Revision() uint64 { return m.h.revision() }

// Path is the locked path.
func (m *Mutex) Path() string { return m.h.path }

// CheckSequencer asks the cluster whether sq's lock is still held with that
// token by that session (a linearizable read). A resource server calls it
// before acting for a request that carries sq.
func (c *Client) CheckSequencer(ctx context.Context, sq Sequencer) (bool, error) {
	resp, err := c.do(ctx, nil, &session.Request{Type: session.MsgCheckSequencer, Sequencer: &sq})
	if err != nil {
		return false, err
	}
	return resp.Valid, nil
}

// LockQueue lists the lock requests on path in queue order, the granted
// ones first; phantoms are holders that were lost while lock-delay keeps
// the lock unavailable. At most 10000 are listed.
func (c *Client) LockQueue(ctx context.Context, path string, opts ...ReadOption) ([]LockInfo, error) {
	o := buildRead(opts)
	resp, err := c.read(ctx, o, &session.Request{Type: session.MsgLockQueue, Path: path})
	if err != nil {
		return nil, err
	}
	return resp.Locks, nil
}

// LockEvent is one entry of a lock's history (Client.LockHistory): a
// grant, or how a hold ended, with its token, session, identity and times.
type LockEvent = namespace.LockEvent

// LockHistory returns the recorded grants and ends of the locks on path,
// newest first: at most limit (0: all the cluster keeps, up to 10000),
// with subtree also those of locks below path. The cluster keeps a
// bounded window (the LockHistoryMax and LockHistoryMaxAgeMillis cluster
// settings).
func (c *Client) LockHistory(ctx context.Context, path string, subtree bool, limit int, opts ...ReadOption) ([]LockEvent, error) {
	o := buildRead(opts)
	resp, err := c.do(ctx, nil, &session.Request{Type: session.MsgLockHistory, Path: path, Recursive: subtree,
		Limit: int32(min(limit, 1<<30)), Stale: o.stale})
	if err != nil {
		return nil, err
	}
	return resp.LockHistory, nil
}
