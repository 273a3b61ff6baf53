package lease

import (
	"context"
	"log/slog"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// Leadership is this member's leadership, as the keeper serves and
// reaps under it.
type Leadership interface {
	// Term is the term in which this member last became the ready leader.
	Term() uint64
	// IsLeader reports whether this member is the ready leader now.
	IsLeader() bool
	// Leading returns nil when this member is running and the ready
	// leader, else the error a client gets: the member is stopping, or
	// not the leader (naming the leader when it knows it).
	Leading() error
}

// Store is the replicated session table as the keeper reads it.
type Store interface {
	// Session returns an open session (namespace.ErrNoSession if none).
	Session(id uint64) (namespace.SessionInfo, error)
	// Sessions returns every open session.
	Sessions() ([]namespace.SessionInfo, error)
	// Restores counts the snapshots installed on this member: each one
	// replaces the sessions, and the keeper loads them again.
	Restores() uint64
}

// Proposer commits the keeper's expiry commands through the log.
type Proposer interface {
	// Propose commits cmd and returns what applying it produced.
	Propose(ctx context.Context, cmd *namespace.Command) (*namespace.Result, error)
	// Deposed reports whether err, from Propose, means that this member
	// can propose no more: it lost leadership or is stopping.
	Deposed(err error) bool
}

// Admission is what admission control saw of clients coming in: the
// keeper holds expiry while a reconnect storm is being taken in (Keeper's
// expiryCutoff). It is asked in durations, never instants: admission
// control runs on its own clock (the wall clock), the leases on the
// monotonic one, and instants of the two do not compare.
type Admission interface {
	// RefusedWithin reports whether a connection attempt was refused for
	// load within the last d.
	RefusedWithin(d time.Duration) bool
	// TakingIn reports whether clients are still being taken in: an
	// attempt was refused for load, or an admitted handshake ended,
	// within d, or one is in flight now.
	TakingIn(d time.Duration) bool
}

// Parts are what a Keeper works through, given by the member.
type Parts struct {
	// Clock runs the leases (a monotonic reading: a wall-clock step must
	// not end or extend one).
	Clock    session.Clock
	Leader   Leadership
	Store    Store
	Proposer Proposer
	// Admission, when not nil, makes expiry wait out reconnect storms.
	Admission Admission
	Log       *slog.Logger
	// Refuse returns the error that refuses a session at the cap named
	// name (its latchd flag), with limit and who reached it, and counts
	// the refusal.
	Refuse func(name string, limit int, who string) error
}
