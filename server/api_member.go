package server

// This member as the HTTP API sees it (httpapi.Member): the QUIC front's
// handlers, its lock acquisition engine and lease table, its watch hub,
// its store and its view of the cluster. Every error leaves as the wire
// error the QUIC front would send (wireError, locksvc.WireError).

import (
	"context"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/consolestats"
	"github.com/latch-io/latch/server/httpapi"
	"github.com/latch-io/latch/server/locksvc"
	"github.com/latch-io/latch/server/quicfront"
	"github.com/latch-io/latch/server/watch"
	"github.com/latch-io/latch/session"
)

// apiMember implements httpapi.Member for the member of f.
type apiMember struct {
	s *Server
	f *front
}

var (
	_ httpapi.Member = apiMember{}
	_ httpapi.Stats  = (*consolestats.Sampler)(nil)
)

// apiConn is one API request as a connection of the QUIC front: its
// identity, and the sessions whose tokens it presented attached.
type apiConn struct {
	f *front
	c *quicfront.Conn
}

func (m apiMember) Conn(identity string) httpapi.Conn {
	return apiConn{f: m.f, c: m.f.quic.NewConn(identity)}
}

func (c apiConn) Attach(id uint64) { c.c.Attach(id) }

// Call runs req through the QUIC front's Call, the path both fronts take.
func (c apiConn) Call(ctx context.Context, req *session.Request) (*session.Response, error) {
	return c.f.quic.Call(ctx, c.c, req)
}

// Acquire runs the lock service's acquisition engine for a long poll.
func (m apiMember) Acquire(ctx context.Context, r httpapi.LockRequest) (httpapi.LockOutcome, error) {
	o, err := m.f.locks.Acquire(&locksvc.Acquire{
		Path: r.Path, Mode: r.Mode, Session: r.Session, Identity: r.Identity, Data: r.Data,
		HoldTTL: r.HoldTTL, LockDelay: r.LockDelay, Try: r.Try, Wait: r.Wait,
	}, pollCaller{ctx})
	out := httpapi.LockOutcome{Node: o.Node, Rev: o.Rev, Granted: o.Granted, Token: o.Token, Ended: o.Ended}
	if err != nil {
		return out, wireError(err)
	}
	return out, nil
}

// pollCaller is a long poll as the acquisition engine's caller: it is
// answered once, after the engine, with the grant or the end of the
// wait, and a request whose context ends is a client that gave up. Its
// held lock is followed by no connection: none lives to be told.
type pollCaller struct{ ctx context.Context }

func (k pollCaller) Queued(string, uint64, bool) error { return nil }
func (k pollCaller) Follow(string)                     {}
func (k pollCaller) Granted(locksvc.Outcome) error     { return nil }
func (k pollCaller) Done() <-chan struct{}             { return k.ctx.Done() }
func (k pollCaller) GaveUp() bool                      { return true }

func (m apiMember) Renew(id uint64) (time.Duration, bool) { return m.f.keep.Renew(id) }
func (m apiMember) ExpiresIn(id uint64) time.Duration     { return m.f.keep.ExpiresIn(id) }

// apiWatch is a watcher of the hub the QUIC front's watches use.
type apiWatch struct {
	hub   *watch.Hub
	w     *watch.Watcher
	start uint64
}

func (m apiMember) Watch(path string, kind session.WatchKind, from uint64) httpapi.Watch {
	w := watch.NewWatcher(path, kind, from, false, nil)
	return &apiWatch{hub: m.f.hub, w: w, start: m.f.hub.Register(w)}
}

func (w *apiWatch) Start() uint64           { return w.start }
func (w *apiWatch) Notify() <-chan struct{} { return w.w.Notify() }
func (w *apiWatch) Close()                  { w.hub.Unregister(w.w) }
func (w *apiWatch) Take(buf []session.WatchEvent) ([]session.WatchEvent, bool) {
	return w.hub.Take(w.w, buf)
}

// WatchSlot counts a watch against MaxWatchesPerIdentity, the cap the
// QUIC front's watches count against too.
func (m apiMember) WatchSlot(identity string) (func(), error) {
	if err := m.f.watchesBy.add(identity, m.s.cfg.MaxWatchesPerIdentity); err != nil {
		m.f.capRefusals.watches.Add(1)
		return nil, err
	}
	return func() { m.f.watchesBy.remove(identity) }, nil
}

func (m apiMember) Readable(identity string, events []session.WatchEvent) []session.WatchEvent {
	return m.f.readableEvents(identity, events)
}

func (m apiMember) Get(path string) ([]byte, namespace.Stat, error) {
	data, st, err := m.s.store.Get(path)
	return data, st, locksvc.WireError(err)
}

func (m apiMember) Session(id uint64) (namespace.SessionInfo, error) { return m.s.store.Session(id) }

func (m apiMember) Lock(node string) (namespace.LockInfo, error) {
	info, err := m.s.store.Lock(node)
	return info, locksvc.WireError(err)
}

func (m apiMember) LockQueue(path string) ([]namespace.LockInfo, error) {
	return m.s.store.LockQueue(path)
}

func (m apiMember) LockPaths(limit int) ([]string, bool, error) { return m.s.store.LockPaths(limit) }

func (m apiMember) Authorize(identity, path string, want namespace.Perm) error {
	return m.s.store.Authorize(identity, path, want)
}

func (m apiMember) Limits() namespace.Limits { return m.s.store.Limits() }

func (m apiMember) Leader() (id, clientAddr string) { return m.s.Leader() }
func (m apiMember) IsLeader() bool                  { return m.s.IsLeader() }

func (m apiMember) LinearizableRead(ctx context.Context) error {
	if err := m.s.LinearizableRead(ctx); err != nil {
		return wireError(err)
	}
	return nil
}

func (m apiMember) Ready() error    { return m.s.ready() }
func (m apiMember) Applied() uint64 { return m.s.fsmApplied() }

func (m apiMember) Members() ([]MemberStatus, error) {
	ms, err := m.s.Members()
	if err != nil {
		return nil, wireError(err)
	}
	return ms, nil
}

func (m apiMember) MemberAPIAddr(id string) string { return m.s.memberInfo(id).APIAddr }
