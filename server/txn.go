package server

import (
	"context"
	"fmt"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/quicfront"
	"github.com/latch-io/latch/session"
)

// txn serves MsgTxn: the compares and both branches go into one OpTxn,
// which Apply decides (namespace/txn.go). Multi is its special case
// without compares or else, and shares the op checks and the answer.
func (f *front) txn(ctx context.Context, c *quicfront.Conn, req *session.Request) (*session.Response, error) {
	l := f.s.store.Limits()
	if n := len(req.Ops) + len(req.Else); n > l.MaxMultiOps {
		return nil, fmt.Errorf("%w: %d then+else ops > %d", namespace.ErrTooManyOps, n, l.MaxMultiOps)
	}
	if len(req.Compares) > l.MaxMultiOps {
		return nil, fmt.Errorf("%w: %d compares > %d", namespace.ErrTooManyOps, len(req.Compares), l.MaxMultiOps)
	}
	for i, cmp := range req.Compares {
		if err := cmp.Validate(); err != nil {
			return nil, fmt.Errorf("txn compare %d: %w", i, err)
		}
		if err := namespace.ValidatePath(cmp.Path, l); err != nil {
			return nil, fmt.Errorf("txn compare %d: %w", i, err)
		}
	}
	then, err := f.commandOps(req.Ops, req.Session, "txn then", true)
	if err != nil {
		return nil, err
	}
	els, err := f.commandOps(req.Else, req.Session, "txn else", true)
	if err != nil {
		return nil, err
	}
	res, err := f.s.Propose(ctx, &namespace.Command{
		Op: namespace.OpTxn, Compares: req.Compares, Ops: then, Else: els, Identity: c.Identity(),
	})
	if err != nil {
		return nil, err
	}
	resp := &session.Response{Rev: res.Index, Succeeded: res.Succeeded, Results: opResults(res.Results)}
	return resp, res.Err
}

// commandOps turns the ops of a multi or a txn branch into commands acting
// for session sid, refusing what the namespace would refuse before it
// costs a log entry.
func (f *front) commandOps(ops []session.Op, sid uint64, what string, gets bool) ([]namespace.Command, error) {
	if len(ops) == 0 {
		return nil, nil
	}
	out := make([]namespace.Command, len(ops))
	for i, op := range ops {
		switch op.Type {
		case namespace.OpCreate, namespace.OpSet, namespace.OpDelete, namespace.OpCheck:
		case namespace.OpGet:
			if gets {
				break
			}
			fallthrough
		default:
			return nil, fmt.Errorf("%w: %s op %d: %v is not allowed in %s", namespace.ErrBadCommand, what, i, op.Type, what)
		}
		if err := f.checkData(op.Data); err != nil {
			return nil, fmt.Errorf("%s op %d: %w", what, i, err)
		}
		out[i] = namespace.Command{
			Op: op.Type, Path: op.Path, Data: op.Data, Flags: op.Flags, Version: op.Version, Session: sid,
		}
	}
	return out, nil
}

// opResults is the answer's entry per op of a multi or a txn branch.
func opResults(rs []namespace.Result) []session.OpResult {
	out := make([]session.OpResult, len(rs))
	for i := range rs {
		r := &rs[i]
		o := &out[i]
		o.Path, o.Stat, o.Data = r.Path, r.Stat, r.Data
		if r.Err != nil {
			o.Code, o.Message = session.CodeOf(r.Err), r.Err.Error()
		}
	}
	return out
}
