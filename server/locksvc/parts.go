package locksvc

import (
	"context"
	"log/slog"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// Conn is a client connection as the service sees one: the key the held
// locks granted to it are followed by (comparable: a pointer), and its
// identity, for the ACL checks.
type Conn interface {
	Identity() string
}

// Store is the replicated lock index as the service reads it.
type Store interface {
	// Lock returns the lock request node (namespace.ErrNoLock if none).
	Lock(node string) (namespace.LockInfo, error)
	// LockByRequestID names the request of session made with request id.
	LockByRequestID(session uint64, id string) (node string, ok bool, err error)
	// LockQueue lists the requests on path and below it.
	LockQueue(path string) ([]namespace.LockInfo, error)
	// CheckSequencer reports whether the sequencer still holds its lock.
	CheckSequencer(path string, mode namespace.LockMode, token uint64, session uint64) (bool, error)
	// Authorize fails unless identity may do want on path.
	Authorize(identity, path string, want namespace.Perm) error
	// NextInLine names the request on path next in line to be granted
	// (the first one that cannot run yet), if any.
	NextInLine(path string) (node string, ok bool)
	// NextTimer is when the next lock timer (lock-delay end, hold TTL)
	// is due, in the cluster clock's nanoseconds.
	NextTimer() (unixNanos int64, ok bool)
}

// Proposer commits the service's lock commands through the log.
type Proposer interface {
	// Propose commits cmd and returns what applying it produced (the
	// namespace's rejection in the Result's Err).
	Propose(ctx context.Context, cmd *namespace.Command) (*namespace.Result, error)
	// Deposed reports whether err, from Propose, means that this member
	// can propose no more: it lost leadership or is stopping.
	Deposed(err error) bool
	// Context is the member's: it ends when the member stops.
	Context() context.Context
}

// Leadership is this member's leadership, as the tick loop follows it.
type Leadership interface {
	// Follow runs lead for every term this member is the ready leader,
	// until stop. lead returns when stop closes or the term ends, saying
	// whether this member leads again (a new term) by then.
	Follow(stop <-chan struct{}, lead func(stop <-chan struct{}, sub <-chan bool) bool)
	// IsLeader reports whether this member is the ready leader now.
	IsLeader() bool
}

// Leases are the leader's session leases (package lease's Keeper).
type Leases interface {
	// Serving returns nil when this member serves session requests (the
	// ready leader with its lease table loaded), else the client's error.
	Serving() error
	// Retime gives session id's lease a new TTL and restarts it; false
	// when the lease is gone.
	Retime(id uint64, ttl time.Duration) bool
}

// Front is the checks the member's request handlers share.
type Front interface {
	// CheckData refuses data the namespace would refuse.
	CheckData(data []byte) error
	// GrantTTL clamps a session TTL asked for into the session bounds.
	GrantTTL(millis int64) (time.Duration, error)
	// ReadAt serves a read of req: linearizable unless req says Stale;
	// it returns the revision read at.
	ReadAt(ctx context.Context, req *session.Request) (uint64, error)
	// CanRead fails unless c's identity may read path (a valid path).
	CanRead(c Conn, path string) error
}

// Clock is the cluster clock the leader stamps ticks with (nanoseconds,
// the unit of Store.NextTimer).
type Clock interface {
	Now() int64
}

// Config is the member's settings the service runs by.
type Config struct {
	// ApplyTimeout bounds one lock command's commit.
	ApplyTimeout time.Duration
	// ExpiryTick is the longest the tick loop sleeps, and its pause after
	// a burst of ticks.
	ExpiryTick time.Duration
	// MaxFrameSize bounds a frame; a LockQueue answer takes half of it.
	MaxFrameSize int
}

// Parts are what a Service works through, given by the member.
type Parts struct {
	Store    Store
	Proposer Proposer
	Leader   Leadership
	Leases   Leases
	Front    Front
	Clock    Clock
	Log      *slog.Logger
}
