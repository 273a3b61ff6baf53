package client

import (
	"context"
	"fmt"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// Txn is a conditional transaction, built etcd-style and decided by the
// cluster in one command:
//
//	resp, err := c.Txn().
//		If(client.Compare(client.Value("/cfg/mode"), "=", "blue")).
//		Then(client.OpSet("/cfg/mode", []byte("green"))).
//		Else(client.OpGet("/cfg/mode")).
//		Commit(ctx)
//
// When every compare holds the Then ops run, else the Else ops; the ops
// of the branch that runs apply all or nothing, like a Multi (a failing op
// fails the Txn with its error and changes nothing). Ops are OpCreate,
// OpSet, OpDelete, OpCheck and OpGet; then and else together hold at most
// the cluster's max_multi_ops. Build a Txn with Client.Txn or
// Session.Txn; each call of If, Then and Else adds to its list.
type Txn struct {
	c     *Client
	cells *Cells   // Cells.Txn: c is the cell's client, found by Commit
	s     *Session // acts for it; nil: the client's default session
	own   bool     // s was named (Session.Txn)
	cmps  []Cmp
	then  []Op
	els   []Op
}

// Txn starts a transaction whose ephemeral creates and ownership checks
// use the client's default session.
func (c *Client) Txn() *Txn { return &Txn{c: c} }

// Txn starts a transaction acting for s.
func (s *Session) Txn() *Txn { return &Txn{c: s.c, s: s, own: true} }

// If adds conditions; all must hold for Then to run.
func (t *Txn) If(cmps ...Cmp) *Txn { t.cmps = append(t.cmps, cmps...); return t }

// Then adds ops run when every condition holds.
func (t *Txn) Then(ops ...Op) *Txn { t.then = append(t.then, ops...); return t }

// Else adds ops run when a condition does not hold.
func (t *Txn) Else(ops ...Op) *Txn { t.els = append(t.els, ops...); return t }

// TxnResponse is a committed Txn's outcome.
type TxnResponse struct {
	// Succeeded: every condition held and the Then ops ran; else the
	// Else ops ran.
	Succeeded bool
	// Results has one entry per op of the branch that ran (an OpGet's
	// has Data and Stat). When the Txn failed in an op, only that op's
	// Err is set.
	Results []OpResult
	// Rev is the revision the Txn was applied at.
	Rev uint64
}

// Commit sends the Txn. A condition that cannot be evaluated (a bad
// compare), an op of the running branch that fails, or a refused right
// fail the Txn (errors.Is the sentinel); the response is returned with
// the error when the cluster decided the branch.
func (t *Txn) Commit(ctx context.Context) (*TxnResponse, error) {
	req := &session.Request{Type: session.MsgTxn, Compares: make([]namespace.Compare, len(t.cmps))}
	for i, cmp := range t.cmps {
		if cmp.err != nil {
			return nil, fmt.Errorf("latch: txn compare %d: %w", i, cmp.err)
		}
		req.Compares[i] = cmp.cmp
	}
	var err error
	if req.Ops, err = txnOps(t.then, "then"); err != nil {
		return nil, err
	}
	if req.Else, err = txnOps(t.els, "else"); err != nil {
		return nil, err
	}
	if t.cells != nil {
		first := ""
		for _, p := range txnPaths(req) {
			if first == "" {
				first = p
			} else if a, b := session.CellOf(first), session.CellOf(p); a != b {
				return nil, fmt.Errorf("%w: a txn is atomic within one cell; %s is in cell %q, %s in cell %q",
					ErrCrossCell, first, a, p, b)
			}
		}
		if first == "" {
			return nil, fmt.Errorf("%w: a txn in cells needs a path", ErrBadConfig)
		}
		c, err := t.cells.Client(ctx, first)
		if err != nil {
			return nil, err
		}
		t = &Txn{c: c, cmps: t.cmps, then: t.then, els: t.els}
	}
	s := t.s
	if !t.own {
		s = t.c.owner()
		if needsSession(t.then) || needsSession(t.els) {
			if s = t.c.Session(); s == nil {
				return nil, fmt.Errorf("latch: txn: %w", ErrSessionClosed)
			}
		}
	}
	resp, err := t.c.do(ctx, s, req)
	if resp == nil {
		return nil, err
	}
	out := &TxnResponse{Succeeded: resp.Succeeded, Rev: resp.Rev, Results: make([]OpResult, len(resp.Results))}
	for i := range resp.Results {
		r := &resp.Results[i]
		out.Results[i] = OpResult{Path: r.Path, Stat: r.Stat, Data: r.Data, Err: r.Err()}
	}
	return out, err
}

// txnPaths lists every path req names.
func txnPaths(req *session.Request) []string {
	var ps []string
	for _, c := range req.Compares {
		ps = append(ps, c.Path)
	}
	for _, ops := range [2][]session.Op{req.Ops, req.Else} {
		for _, op := range ops {
			ps = append(ps, op.Path)
		}
	}
	return ps
}

func txnOps(ops []Op, branch string) ([]session.Op, error) {
	if len(ops) == 0 {
		return nil, nil
	}
	out := make([]session.Op, len(ops))
	for i, op := range ops {
		if op.err != nil {
			return nil, fmt.Errorf("latch: txn %s op %d: %w", branch, i, op.err)
		}
		out[i] = op.op
	}
	return out, nil
}

// OpGet reads path inside a Txn (not a Multi): its OpResult has the data
// and stat as the earlier ops of the branch left them. A missing node
// fails the Txn with ErrNoNode; guard it with NodeExists.
func OpGet(path string) Op {
	return Op{op: session.Op{Type: namespace.OpGet, Path: path, Version: namespace.AnyVersion}}
}

// Cmp is one condition of a Txn, built by Compare, NodeExists or NodeAbsent.
type Cmp struct {
	cmp namespace.Compare
	err error // reported by Commit
}

// CmpTarget is what a Compare reads: Value, Version, CreateRev, ModRev or
// Owner of a path.
type CmpTarget struct {
	path   string
	target namespace.CmpTarget
}

// Value compares path's data, as bytes (a []byte or string operand).
func Value(path string) CmpTarget { return CmpTarget{path, namespace.CmpValue} }

// Version compares path's data version.
func Version(path string) CmpTarget { return CmpTarget{path, namespace.CmpVersion} }

// CreateRev compares the revision that created path.
func CreateRev(path string) CmpTarget { return CmpTarget{path, namespace.CmpCreateRev} }

// ModRev compares the revision that last changed path's data.
func ModRev(path string) CmpTarget { return CmpTarget{path, namespace.CmpModRev} }

// Owner compares path's ephemeral owner session (0: persistent).
func Owner(path string) CmpTarget { return CmpTarget{path, namespace.CmpOwner} }

// Compare builds a condition: target op operand, op one of "=", "!=",
// ">", "<". The operand is a []byte or string for Value, an integer for
// the others. A condition on a node that does not exist is false (use
// NodeExists and NodeAbsent for existence).
func Compare(target CmpTarget, op string, operand any) Cmp {
	c := Cmp{cmp: namespace.Compare{Path: target.path, Target: target.target}}
	o, err := namespace.ParseCmpOp(op)
	if err != nil {
		c.err = fmt.Errorf("%w: %w", ErrBadOption, err)
		return c
	}
	c.cmp.Op = o
	if target.target == namespace.CmpValue {
		switch v := operand.(type) {
		case []byte:
			c.cmp.Value = v
		case string:
			c.cmp.Value = []byte(v)
		default:
			c.err = fmt.Errorf("%w: Value(%s) compares with []byte or string, not %T", ErrBadOption, target.path, operand)
		}
		return c
	}
	switch v := operand.(type) {
	case int:
		c.cmp.Number = int64(v)
	case int64:
		c.cmp.Number = v
	case uint64:
		if v > 1<<63-1 {
			c.err = fmt.Errorf("%w: %d out of range", ErrBadOption, v)
		}
		c.cmp.Number = int64(v)
	default:
		c.err = fmt.Errorf("%w: %s(%s) compares with an integer, not %T", ErrBadOption, target.target, target.path, operand)
	}
	if c.err == nil {
		c.err = c.cmp.Validate()
	}
	return c
}

// NodeExists holds when path exists.
func NodeExists(path string) Cmp {
	return Cmp{cmp: namespace.Compare{Path: path, Target: namespace.CmpExists, Number: 1}}
}

// NodeAbsent holds when path does not exist.
func NodeAbsent(path string) Cmp {
	return Cmp{cmp: namespace.Compare{Path: path, Target: namespace.CmpExists, Number: 0}}
}

// Txn starts a transaction in the cell of its paths: Commit fails with
// ErrCrossCell, before anything is sent, when its compares and ops name
// paths of two cells.
func (x *Cells) Txn() *Txn { return &Txn{cells: x} }
