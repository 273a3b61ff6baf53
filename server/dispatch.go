package server

import (
	"context"
	"fmt"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/quicfront"
	"github.com/latch-io/latch/session"
)

// register installs the handlers of every message type this member serves
// (the QUIC front answers Hello itself). Another part of the server
// (locks) adds its own with handleUnary and handleStream before Start.
func (f *front) register() {
	f.handleUnary(session.MsgOpenSession, f.openSession)
	f.handleUnary(session.MsgResumeSession, f.resumeSession)
	f.handleUnary(session.MsgKeepAlive, f.keepAlive)
	f.handleUnary(session.MsgCloseSession, f.closeSession)

	f.handleUnary(session.MsgGet, f.get)
	f.handleUnary(session.MsgStat, f.stat)
	f.handleUnary(session.MsgExists, f.exists)
	f.handleUnary(session.MsgChildren, f.children)
	f.handleUnary(session.MsgSync, f.sync)
	f.handleUnary(session.MsgSessions, f.sessions)
	f.handleUnary(session.MsgMembers, f.members)
	f.handleUnary(session.MsgStatus, f.status)

	f.handleUnary(session.MsgCreate, f.create)
	f.handleUnary(session.MsgSet, f.set)
	f.handleUnary(session.MsgDelete, f.delete)
	f.handleUnary(session.MsgMulti, f.multi)
	f.handleUnary(session.MsgTxn, f.txn) // txn.go

	f.handleStream(session.MsgWatch, f.serveWatch)

	f.registerLocks()       // lock_member.go (package locksvc): MsgLock, MsgLockRelease, MsgLockRenew, MsgCheckSequencer, MsgLockQueue
	f.registerLockHistory() // lockhistory.go: MsgLockHistory
	f.registerACL()         // acl.go: MsgACL, MsgACLSet, MsgACLRemove
	f.registerCache()       // cache.go: MsgCache and the cache observer
}

// handleUnary makes h the handler of requests of type t (on the QUIC
// front, whose Call the HTTP API's requests take too).
func (f *front) handleUnary(t session.MsgType, h quicfront.Unary) { f.quic.HandleUnary(t, h) }

// handleStream makes h the handler of streaming requests of type t.
func (f *front) handleStream(t session.MsgType, h quicfront.Stream) { f.quic.HandleStream(t, h) }

// readAt makes a read linearizable unless it asked for Stale, and returns
// the revision to answer with: the applied index before the read, so that
// watching from it misses nothing that the read did not see. A Stale read
// waits for MinRev (staleread.go).
func (f *front) readAt(ctx context.Context, req *session.Request) (uint64, error) {
	if !req.Stale {
		if err := f.s.LinearizableRead(ctx); err != nil {
			return 0, err
		}
		f.reads.linearizable.Add(1)
	} else if err := f.s.running(); err != nil {
		return 0, err
	} else {
		if err := f.waitMinRev(ctx, req.MinRev); err != nil {
			return 0, err
		}
		f.reads.stale.Add(1)
	}
	return f.s.fsmApplied(), nil
}

// nodeRead reads one node (or its children) for req on behalf of c and
// returns the revision the read saw exactly (stableRead). A linearizable
// read then waits out the client-cache invalidations of the node it may
// have seen written (cache.go), and one asking to Cache registers the node
// first; cached says whether it stays registered for c.
func (f *front) nodeRead(ctx context.Context, c *quicfront.Conn, req *session.Request, read func() error) (rev uint64, cached bool, err error) {
	if req.Cache && !req.Stale {
		f.reads.fills.Add(1)
		cached = f.cache.register(c, req.Path)
	}
	rev, stable, gen, err := f.stableRead(ctx, read)
	if req.Stale {
		return rev, false, err
	}
	if gerr := f.cache.gate(ctx, req.Path, stable, gen); gerr != nil {
		return 0, false, gerr
	}
	if cached {
		cached = f.cache.registered(c, req.Path)
	}
	return rev, cached, err
}

// maxStableTries bounds how often stableRead reads again because a batch
// was applied meanwhile.
const maxStableTries = 16

// stableRead runs read while no batch is being applied (the FSM's apply
// generation is even and the same before and after), so the state it saw
// is exactly the applied index, which it returns: a client that saw that
// revision never reads older state from another member (MinRev), and
// watching from it misses nothing. Reads are local and short, so a batch
// rarely overlaps one; after maxStableTries it answers with the index
// applied before the read (stable false; gen is the generation after).
func (f *front) stableRead(ctx context.Context, read func() error) (rev uint64, stable bool, gen uint64, err error) {
	g := f.s.fsm.Gen()
	for try := 1; ; try++ {
		before := g.Load()
		rev = f.s.fsmApplied()
		err = read()
		gen = g.Load()
		if before == gen && gen%2 == 0 {
			return rev, true, gen, err
		}
		if try == maxStableTries {
			return rev, false, gen, err
		}
		if gen%2 == 1 {
			if werr := g.Wait(ctx, gen+1); werr != nil {
				return 0, false, gen, werr
			}
		}
	}
}

func (f *front) get(ctx context.Context, c *quicfront.Conn, req *session.Request) (*session.Response, error) {
	rev, err := f.readAt(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := f.canRead(c, req.Path); err != nil {
		return nil, err
	}
	var (
		data []byte
		st   namespace.Stat
	)
	rev, cached, err := f.nodeRead(ctx, c, req, func() (err error) {
		data, st, err = f.s.store.Get(req.Path)
		return err
	})
	if err != nil {
		// A node known absent is cached too (Cached with ErrNoNode).
		return &session.Response{Rev: rev, Cached: cached}, err
	}
	return &session.Response{Data: data, Stat: st, Rev: rev, Cached: cached}, nil
}

func (f *front) stat(ctx context.Context, c *quicfront.Conn, req *session.Request) (*session.Response, error) {
	rev, err := f.readAt(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := f.canRead(c, req.Path); err != nil {
		return nil, err
	}
	var st namespace.Stat
	rev, cached, err := f.nodeRead(ctx, c, req, func() (err error) {
		st, err = f.s.store.Stat(req.Path)
		return err
	})
	if err != nil {
		return &session.Response{Rev: rev, Cached: cached}, err
	}
	return &session.Response{Stat: st, Rev: rev, Cached: cached}, nil
}

func (f *front) exists(ctx context.Context, c *quicfront.Conn, req *session.Request) (*session.Response, error) {
	rev, err := f.readAt(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := f.canRead(c, req.Path); err != nil {
		return nil, err
	}
	var (
		ok bool
		st namespace.Stat
	)
	rev, cached, err := f.nodeRead(ctx, c, req, func() (err error) {
		ok, st, err = f.s.store.Exists(req.Path)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &session.Response{Exists: ok, Stat: st, Rev: rev, Cached: cached}, nil
}

func (f *front) children(ctx context.Context, c *quicfront.Conn, req *session.Request) (*session.Response, error) {
	rev, err := f.readAt(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := f.canRead(c, req.Path); err != nil {
		return nil, err
	}
	var (
		names []string
		more  bool
	)
	// Children are never cached; the read still waits for invalidations
	// of the node (its children changed) like any linearizable read.
	plain := *req
	plain.Cache = false
	rev, _, err = f.nodeRead(ctx, c, &plain, func() (err error) {
		names, more, err = f.s.store.Children(req.Path, req.After, int(req.Limit))
		return err
	})
	if err != nil {
		return nil, err
	}
	names = f.readableChildren(c, req.Path, names)
	return &session.Response{Names: names, More: more, Rev: rev}, nil
}

func (f *front) sync(ctx context.Context, _ *quicfront.Conn, _ *session.Request) (*session.Response, error) {
	if err := f.s.LinearizableRead(ctx); err != nil {
		return nil, err
	}
	return &session.Response{Rev: f.s.fsmApplied()}, nil
}

// canRead fails with namespace.ErrPermissionDenied unless the client's
// identity may read p (ValidatePath first, so a bad path says so).
func (f *front) canRead(c *quicfront.Conn, p string) error {
	if err := namespace.ValidatePath(p, f.s.store.Limits()); err != nil {
		return err
	}
	return f.s.store.Authorize(c.Identity(), p, namespace.PermRead)
}

// readableChildren drops the names of children the client may not read: a
// rule can deny a child of a readable node, and its name is its data too.
func (f *front) readableChildren(c *quicfront.Conn, parent string, names []string) []string {
	out := names[:0]
	for _, n := range names {
		if f.s.store.Authorize(c.Identity(), namespace.Join(parent, n), namespace.PermRead) == nil {
			out = append(out, n)
		}
	}
	return out
}

// propose commits cmd and turns a namespace rejection into the error.
func (f *front) propose(ctx context.Context, cmd *namespace.Command) (*namespace.Result, error) {
	res, err := f.s.Propose(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return res, res.Err
}

// checkData refuses data the namespace would refuse, before it costs a log
// entry.
func (f *front) checkData(data []byte) error {
	if max := f.s.store.Limits().MaxDataBytes; len(data) > max {
		return fmt.Errorf("%w: %d bytes > %d", namespace.ErrDataTooLarge, len(data), max)
	}
	return nil
}

func (f *front) create(ctx context.Context, c *quicfront.Conn, req *session.Request) (*session.Response, error) {
	if err := f.checkData(req.Data); err != nil {
		return nil, err
	}
	res, err := f.propose(ctx, &namespace.Command{
		Op: namespace.OpCreate, Path: req.Path, Data: req.Data, Flags: req.Flags, Session: req.Session,
		Identity: c.Identity(),
	})
	if err != nil {
		return nil, err
	}
	return &session.Response{Path: res.Path, Stat: res.Stat, Rev: res.Index}, nil
}

func (f *front) set(ctx context.Context, c *quicfront.Conn, req *session.Request) (*session.Response, error) {
	if err := f.checkData(req.Data); err != nil {
		return nil, err
	}
	res, err := f.propose(ctx, &namespace.Command{
		Op: namespace.OpSet, Path: req.Path, Data: req.Data, Version: req.Version,
		Session: req.Session, Identity: c.Identity(),
	})
	if err != nil {
		return nil, err
	}
	return &session.Response{Stat: res.Stat, Rev: res.Index}, nil
}

func (f *front) delete(ctx context.Context, c *quicfront.Conn, req *session.Request) (*session.Response, error) {
	if req.Recursive {
		// Deleting a subtree in one command could exceed any bound; the
		// client deletes child by child (client/doc.go).
		return nil, fmt.Errorf("%w: recursive delete is done by the client, node by node", namespace.ErrBadCommand)
	}
	res, err := f.propose(ctx, &namespace.Command{
		Op: namespace.OpDelete, Path: req.Path, Version: req.Version, Session: req.Session, Identity: c.Identity(),
	})
	if err != nil {
		return nil, err
	}
	return &session.Response{Rev: res.Index}, nil
}

func (f *front) multi(ctx context.Context, c *quicfront.Conn, req *session.Request) (*session.Response, error) {
	if max := f.s.store.Limits().MaxMultiOps; len(req.Ops) > max {
		return nil, fmt.Errorf("%w: %d > %d", namespace.ErrTooManyOps, len(req.Ops), max)
	}
	ops, err := f.commandOps(req.Ops, req.Session, "multi", false)
	if err != nil {
		return nil, err
	}
	res, err := f.s.Propose(ctx, &namespace.Command{Op: namespace.OpMulti, Ops: ops, Identity: c.Identity()})
	if err != nil {
		return nil, err
	}
	return &session.Response{Rev: res.Index, Results: opResults(res.Results)}, res.Err
}

// maxListedSessions bounds a Sessions answer well inside the frame limit;
// More says the list was cut.
const maxListedSessions = 10000

func (f *front) sessions(ctx context.Context, _ *quicfront.Conn, req *session.Request) (*session.Response, error) {
	rev, err := f.readAt(ctx, req)
	if err != nil {
		return nil, err
	}
	all, err := f.s.store.Sessions()
	if err != nil {
		return nil, err
	}
	resp := &session.Response{Rev: rev}
	budget := f.s.cfg.Transport.MaxFrameSize / 2
	for _, si := range all {
		if len(resp.Sessions) == maxListedSessions || budget < 64+len(si.Identity) {
			resp.More = true
			break
		}
		budget -= 64 + len(si.Identity)
		resp.Sessions = append(resp.Sessions, session.SessionInfo{
			ID: si.ID, TTLMillis: si.TTLMillis, Identity: si.Identity, OpenRev: si.OpenRev, OpenTime: si.OpenTime,
			ExpiresInMillis: f.keep.ExpiresIn(si.ID).Milliseconds(),
		})
	}
	return resp, nil
}

func (f *front) members(_ context.Context, _ *quicfront.Conn, _ *session.Request) (*session.Response, error) {
	ms, err := f.s.Members()
	if err != nil {
		return nil, err
	}
	_, leader := f.s.Leader()
	return &session.Response{Members: memberInfos(ms), Leader: leader}, nil
}

func memberInfos(ms []MemberStatus) []session.MemberInfo {
	out := make([]session.MemberInfo, 0, len(ms))
	for _, m := range ms {
		out = append(out, session.MemberInfo{
			ID: m.ID, RaftAddr: m.RaftAddr, ClientAddr: m.ClientAddr, HTTPAddr: m.HTTPAddr, APIAddr: m.APIAddr,
			Leader: m.Leader, Voter: m.Suffrage == "voter",
		})
	}
	return out
}

func (f *front) status(_ context.Context, _ *quicfront.Conn, _ *session.Request) (*session.Response, error) {
	st, err := f.s.Status()
	if err != nil {
		return nil, err
	}
	info := &session.StatusInfo{
		ID:           st.ID,
		State:        st.State,
		Term:         st.Term,
		CommitIndex:  st.CommitIndex,
		AppliedIndex: st.AppliedIndex,
		LastIndex:    st.LastLogIndex,
		Sessions:     int64(f.keep.Sessions()),
		Watches:      int64(f.hub.Watchers()),
		Version:      st.Build.String(),
		Stats: map[string]string{
			"leader_id":         st.LeaderID,
			"ready":             fmt.Sprint(st.Ready),
			"snapshot_index":    fmt.Sprint(st.SnapshotIndex),
			"snapshot_restores": fmt.Sprint(st.SnapshotRestores),
			"client_addr":       st.ClientAddr,
			"raft_addr":         st.RaftAddr,
			"http_addr":         st.HTTPAddr,
			"connections":       fmt.Sprint(f.quic.Connections()),
		},
	}
	_, leader := f.s.Leader()
	return &session.Response{Status: info, Members: memberInfos(st.Members), Leader: leader}, nil
}
