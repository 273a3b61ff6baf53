package client

import (
	"context"
	"fmt"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// Op is one operation of a Multi or a Txn, built by OpCreate, OpSet,
// OpDelete or OpCheck (and OpGet, in a Txn only).
type Op struct {
	op  session.Op
	err error // a bad option, reported by Multi
}

// OpCreate creates path like Create. An Ephemeral node belongs to the
// session the Multi runs on.
func OpCreate(path string, data []byte, opts ...CreateOption) Op {
	o := buildCreate(opts)
	return Op{op: session.Op{Type: namespace.OpCreate, Path: path, Data: data, Flags: o.flags}}
}

// OpSet sets path's data like Set.
func OpSet(path string, data []byte, opts ...SetOption) Op {
	o, err := buildSet(opts)
	return Op{op: session.Op{Type: namespace.OpSet, Path: path, Data: data, Version: o.version}, err: err}
}

// OpDelete deletes path like Delete. Recursive is not allowed in a Multi.
func OpDelete(path string, opts ...DeleteOption) Op {
	o, err := buildDelete(opts)
	if err == nil && o.recursive {
		err = fmt.Errorf("%w: Recursive is not allowed in a Multi (%s)", ErrBadOption, path)
	}
	return Op{op: session.Op{Type: namespace.OpDelete, Path: path, Version: o.version}, err: err}
}

// OpCheck makes the Multi fail with ErrBadVersion unless path's version is
// version (ErrNoNode when it does not exist).
func OpCheck(path string, version int64) Op {
	return Op{op: session.Op{Type: namespace.OpCheck, Path: path, Version: version}, err: checkVersion(version)}
}

// OpResult is the outcome of one Multi op.
type OpResult struct {
	// Path is the node created by an OpCreate (with its sequence suffix).
	Path string
	// Stat is the node's metadata after an OpCreate or OpSet, as checked
	// by an OpCheck, or as read by a Txn's OpGet.
	Stat Stat
	// Data is a Txn's OpGet's data.
	Data []byte
	// Err is the op's error when the Multi failed; nil for the others.
	Err error
}

// Multi applies ops all or nothing: either every op succeeds, or none has
// any effect and the error is the first failing op's (errors.Is its
// sentinel), with the failing op's Err set in the results. Ephemeral
// creates belong to the default session; use Session.Multi for another.
func (c *Client) Multi(ctx context.Context, ops ...Op) ([]OpResult, error) {
	s := c.owner()
	if needsSession(ops) {
		if s = c.Session(); s == nil {
			return nil, fmt.Errorf("latch: multi: %w", ErrSessionClosed)
		}
	}
	return c.multi(ctx, s, ops)
}

func needsSession(ops []Op) bool {
	for _, op := range ops {
		if op.op.Type == namespace.OpCreate && op.op.Flags&namespace.FlagEphemeral != 0 {
			return true
		}
	}
	return false
}

func (c *Client) multi(ctx context.Context, s *Session, ops []Op) ([]OpResult, error) {
	req := &session.Request{Type: session.MsgMulti, Ops: make([]session.Op, len(ops))}
	for i, op := range ops {
		if op.err != nil {
			return nil, fmt.Errorf("latch: multi op %d: %w", i, op.err)
		}
		if op.op.Type == namespace.OpGet {
			return nil, fmt.Errorf("latch: multi op %d: %w: OpGet is a Txn op", i, ErrBadOption)
		}
		req.Ops[i] = op.op
	}
	resp, err := c.do(ctx, s, req)
	if resp == nil {
		return nil, err
	}
	out := make([]OpResult, len(resp.Results))
	for i := range resp.Results {
		r := &resp.Results[i]
		out[i] = OpResult{Path: r.Path, Stat: r.Stat, Err: r.Err()}
	}
	return out, err
}
