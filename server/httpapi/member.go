package httpapi

// What the API needs of the member it serves, declared here where it is
// used (package server implements it). Every error a method returns is
// already the wire error (session's sentinels): the API writes it as it
// is.

import (
	"context"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/session"
)

// Member is the member an API serves from.
type Member interface {
	Handlers
	Locks
	Watches
	State
	Access
	Leadership
	Membership
}

// Handlers are the QUIC front's request handlers.
type Handlers interface {
	// Conn is a connection of identity as the handlers see one, with no
	// session attached yet.
	Conn(identity string) Conn
}

// Conn is one API request's view of the handlers: a connection of the
// caller's identity with the sessions it proved it holds attached.
type Conn interface {
	// Attach lets requests name session id (its secret was checked).
	Attach(id uint64)
	// Call runs req through the handler of its type, as a QUIC request
	// of this connection would run.
	Call(ctx context.Context, req *session.Request) (*session.Response, error)
}

// LockRequest is one acquisition as the API hands it to the member's
// lock acquisition engine, the one the QUIC front uses.
type LockRequest struct {
	Path      string
	Mode      session.LockMode
	Session   uint64
	Identity  string // the caller's, for the ACL check
	Data      []byte
	HoldTTL   int64 // milliseconds; 0 holds until released
	LockDelay int64 // milliseconds; 0 takes the cluster's default
	// Try: granted in its own command or refused (ErrLocked); nothing
	// waits.
	Try bool
	// Wait bounds the wait (the request is then withdrawn, ErrTimeout).
	Wait time.Duration
}

// LockOutcome is how an acquisition ended. Node and Rev are set once a
// request exists (also with an error: a wait that timed out names it).
type LockOutcome struct {
	Node    string
	Rev     uint64
	Granted bool
	Token   uint64
	// Ended: the caller went away (its context ended) and its request
	// was withdrawn; there is nothing to answer.
	Ended bool
}

// Locks are the member's lock acquisition engine and lease table.
type Locks interface {
	// Acquire runs one acquisition to its outcome as a long poll: the
	// answer comes once, and a ctx that ends is a caller that gave up.
	Acquire(ctx context.Context, req LockRequest) (LockOutcome, error)
	// Renew renews session id's lease as a keepalive does and returns its
	// TTL; false when the lease is gone.
	Renew(id uint64) (time.Duration, bool)
	// ExpiresIn is how long session id's lease has left (0: unknown).
	ExpiresIn(id uint64) time.Duration
}

// Watches are the member's watch hub, shared with the QUIC front.
type Watches interface {
	// Watch registers a watch of path from revision from (0: now).
	Watch(path string, kind session.WatchKind, from uint64) Watch
	// WatchSlot counts one more watch of identity against the member's
	// per-identity cap; release gives it back.
	WatchSlot(identity string) (release func(), err error)
	// Readable drops the events identity may not read.
	Readable(identity string, events []session.WatchEvent) []session.WatchEvent
}

// Watch is one registered watch.
type Watch interface {
	// Start is the revision the watch starts after.
	Start() uint64
	// Notify has a value when events may be waiting.
	Notify() <-chan struct{}
	// Take returns the waiting events (reusing buf), and done when the
	// watch ended (it fell behind: the last event is a Resync).
	Take(buf []session.WatchEvent) (events []session.WatchEvent, done bool)
	// Close unregisters the watch.
	Close()
}

// State reads the member's applied state. Lock and Get answer a request
// node that is gone as the wire does, with session.ErrNotHeld.
type State interface {
	Get(path string) ([]byte, namespace.Stat, error)
	Session(id uint64) (namespace.SessionInfo, error)
	Lock(node string) (namespace.LockInfo, error)
	LockQueue(path string) ([]namespace.LockInfo, error)
	LockPaths(limit int) (paths []string, more bool, err error)
}

// Access is what the namespace allows: its ACL rules and its limits.
type Access interface {
	// Authorize checks the ACL rules for identity.
	Authorize(identity, path string, want namespace.Perm) error
	Limits() namespace.Limits
}

// Leadership is who leads the cluster, as this member knows it.
type Leadership interface {
	// Leader is the current leader's ID ("" when unknown).
	Leader() (id, clientAddr string)
	// IsLeader reports whether this member is the leader and has applied
	// every entry of earlier terms.
	IsLeader() bool
	// LinearizableRead waits until this member's state holds every write
	// committed before the call.
	LinearizableRead(ctx context.Context) error
}

// Membership is this member's health and the cluster's members.
type Membership interface {
	// Ready is nil when this member knows a leader and has applied what
	// it knows to be committed; Applied is its applied index.
	Ready() error
	Applied() uint64
	// Members lists the members; MemberAPIAddr is one's API address.
	Members() ([]adminapi.MemberStatus, error)
	MemberAPIAddr(id string) string
}
