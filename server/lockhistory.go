package server

import (
	"context"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/quicfront"
	"github.com/latch-io/latch/session"
)

// maxHistoryAnswer bounds one MsgLockHistory answer's records (the window
// itself is bounded by the LockHistoryMax cluster setting).
const maxHistoryAnswer = 10000

// LockHistory returns the recorded grants and ends of the locks on path
// (and below it with subtree), newest first, at most limit (0 or more
// than maxHistoryAnswer: maxHistoryAnswer), and the revision it read at.
// The read is linearizable unless stale. The QUIC and HTTP fronts both
// serve it.
func (s *Server) LockHistory(ctx context.Context, path string, subtree bool, limit int, stale bool) ([]namespace.LockEvent, uint64, error) {
	if !stale {
		if err := s.LinearizableRead(ctx); err != nil {
			return nil, 0, err
		}
	} else if err := s.running(); err != nil {
		return nil, 0, err
	}
	rev := s.fsmApplied()
	if limit <= 0 || limit > maxHistoryAnswer {
		limit = maxHistoryAnswer
	}
	evs, err := s.store.LockHistory(path, subtree, limit)
	return evs, rev, err
}

func (f *front) registerLockHistory() {
	f.handleUnary(session.MsgLockHistory, func(ctx context.Context, c *quicfront.Conn, req *session.Request) (*session.Response, error) {
		if err := f.canRead(c, req.Path); err != nil {
			return nil, err
		}
		evs, rev, err := f.s.LockHistory(ctx, req.Path, req.Recursive, int(req.Limit), req.Stale)
		if err != nil {
			return nil, err
		}
		out := evs[:0]
		for _, ev := range evs { // a rule may deny part of the subtree
			if f.s.store.Authorize(c.Identity(), ev.Node, namespace.PermRead) == nil {
				out = append(out, ev)
			}
		}
		evs = out
		return &session.Response{LockHistory: evs, Rev: rev}, nil
	})
}
