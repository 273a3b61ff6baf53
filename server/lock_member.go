package server

// The member as its lock service (package locksvc) sees it: the parts the
// service declares, given by this member, and the lock handlers routed to
// the service.

import (
	"context"
	"errors"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/locksvc"
	"github.com/latch-io/latch/server/quicfront"
	"github.com/latch-io/latch/session"
)

// lockMember is the member of f as its lock service sees it. Every part
// is read when used: the service is made at register, before Start.
type lockMember struct{ f *front }

var (
	_ locksvc.Store      = lockMember{}
	_ locksvc.Proposer   = lockMember{}
	_ locksvc.Leadership = lockMember{}
	_ locksvc.Leases     = lockMember{}
	_ locksvc.Front      = lockMember{}
	_ locksvc.Clock      = lockMember{}
	_ locksvc.Conn       = (*quicfront.Conn)(nil)
)

func (m lockMember) Lock(node string) (namespace.LockInfo, error) { return m.f.s.store.Lock(node) }

func (m lockMember) LockByRequestID(session uint64, id string) (string, bool, error) {
	return m.f.s.store.LockByRequestID(session, id)
}

func (m lockMember) LockQueue(path string) ([]namespace.LockInfo, error) {
	return m.f.s.store.LockQueue(path)
}

func (m lockMember) CheckSequencer(path string, mode namespace.LockMode, token, session uint64) (bool, error) {
	return m.f.s.store.CheckSequencer(path, mode, token, session)
}

func (m lockMember) Authorize(identity, path string, want namespace.Perm) error {
	return m.f.s.store.Authorize(identity, path, want)
}

func (m lockMember) NextInLine(path string) (string, bool) { return m.f.s.store.NextInLine(path) }

func (m lockMember) NextTimer() (int64, bool) { return m.f.s.store.NextTimer() }

func (m lockMember) Propose(ctx context.Context, cmd *namespace.Command) (*namespace.Result, error) {
	return m.f.s.Propose(ctx, cmd)
}

// Deposed: Propose answers a *NotLeaderError once this member is not the
// leader, ErrClosed once it stops.
func (m lockMember) Deposed(err error) bool {
	var nl *NotLeaderError
	return errors.As(err, &nl) || errors.Is(err, ErrClosed)
}

func (m lockMember) Context() context.Context { return m.f.s.ctx }

func (m lockMember) Follow(stop <-chan struct{}, lead func(stop <-chan struct{}, sub <-chan bool) bool) {
	m.f.s.followLeadership(stop, lead)
}

func (m lockMember) IsLeader() bool { return m.f.s.IsLeader() }

func (m lockMember) Serving() error { return m.f.keep.Serving() }

func (m lockMember) Retime(id uint64, ttl time.Duration) bool { return m.f.keep.Retime(id, ttl) }

func (m lockMember) CheckData(data []byte) error { return m.f.checkData(data) }

func (m lockMember) GrantTTL(millis int64) (time.Duration, error) { return m.f.grantTTL(millis) }

func (m lockMember) ReadAt(ctx context.Context, req *session.Request) (uint64, error) {
	return m.f.readAt(ctx, req)
}

func (m lockMember) CanRead(c locksvc.Conn, path string) error {
	return m.f.canRead(c.(*quicfront.Conn), path)
}

func (m lockMember) Now() int64 { return m.f.s.clock.Now() }

// registerLocks makes the lock service and installs its handlers and its
// apply observer; the caller (register) runs before Start.
func (f *front) registerLocks() {
	s := f.s
	m := lockMember{f}
	l := locksvc.New(locksvc.Config{
		ApplyTimeout: s.cfg.ApplyTimeout, ExpiryTick: s.cfg.ExpiryTick, MaxFrameSize: s.cfg.Transport.MaxFrameSize,
	}, locksvc.Parts{Store: m, Proposer: m, Leader: m, Leases: m, Front: m, Clock: m, Log: s.log})
	f.locks = l
	unary := func(h func(context.Context, locksvc.Conn, *session.Request) (*session.Response, error)) quicfront.Unary {
		return func(ctx context.Context, c *quicfront.Conn, req *session.Request) (*session.Response, error) {
			return h(ctx, c, req)
		}
	}
	f.handleStream(session.MsgLock, f.serveLock)
	f.handleStream(session.MsgLockNotices, func(ctx context.Context, c *quicfront.Conn, str *quic.Stream, _ *session.Request) error {
		return l.ServeNotices(ctx, c, str)
	})
	f.handleUnary(session.MsgLockCall, unary(l.Call))
	f.handleUnary(session.MsgLockRelease, unary(l.Release))
	f.handleUnary(session.MsgLockRenew, unary(l.Renew))
	f.handleUnary(session.MsgCheckSequencer, unary(l.CheckSequencer))
	f.handleUnary(session.MsgLockQueue, unary(l.Queue))
	// openFront installs f.observers after register.
	f.observers = append(f.observers, l)
}
