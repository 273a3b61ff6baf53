package store

import (
	"bytes"
	"cmp"
	"fmt"

	"github.com/latch-io/latch/namespace"
)

// txnOpAllowed reports whether op may be in a txn branch.
func txnOpAllowed(op namespace.Op) bool {
	switch op {
	case namespace.OpCreate, namespace.OpSet, namespace.OpDelete, namespace.OpCheck, namespace.OpGet:
		return true
	}
	return false
}

// txn applies OpTxn: the compares decide the branch, which runs as a
// multi does (runOps); a failing op fails the whole command.
func (c *cmdCtx) txn(cmd *namespace.Command, r *namespace.Result) error {
	l := c.limits()
	if n := len(cmd.Ops) + len(cmd.Else); n > l.MaxMultiOps {
		return fmt.Errorf("%w: %d then+else ops > %d", namespace.ErrTooManyOps, n, l.MaxMultiOps)
	}
	if len(cmd.Compares) > l.MaxMultiOps {
		return fmt.Errorf("%w: %d compares > %d", namespace.ErrTooManyOps, len(cmd.Compares), l.MaxMultiOps)
	}
	// Every op of both branches is checked before anything runs, so a
	// bad op fails the txn whichever branch the state picks.
	for _, ops := range [2][]namespace.Command{cmd.Ops, cmd.Else} {
		for i := range ops {
			if !txnOpAllowed(ops[i].Op) {
				return fmt.Errorf("%w: %s is not allowed in a txn", namespace.ErrBadCommand, ops[i].Op)
			}
		}
	}
	ok := true
	for i := range cmd.Compares {
		held, err := c.compare(&cmd.Compares[i])
		if err != nil {
			return fmt.Errorf("txn compare %d (%s): %w", i, cmd.Compares[i].Path, err)
		}
		ok = ok && held
	}
	r.Succeeded = ok
	ops, branch := cmd.Ops, "then"
	if !ok {
		ops, branch = cmd.Else, "else"
	}
	return c.runOps(ops, r, "txn "+branch, true)
}

// compare evaluates one compare against the overlay. Every compare is
// evaluated (and authorized: reading a node's state needs r), even after
// one failed, so a caller without rights on a path learns nothing from it.
func (c *cmdCtx) compare(cp *namespace.Compare) (bool, error) {
	if err := cp.Validate(); err != nil {
		return false, err
	}
	if err := namespace.ValidatePath(cp.Path, c.limits()); err != nil {
		return false, err
	}
	if err := c.authorize(cp.Path, namespace.PermRead); err != nil {
		return false, err
	}
	n, err := c.node(cp.Path)
	if err != nil {
		return false, err
	}
	if cp.Target == namespace.CmpExists {
		exists := int64(0)
		if n != nil {
			exists = 1
		}
		return (exists == cp.Number) == (cp.Op == namespace.CmpEqual), nil
	}
	if n == nil {
		return false, nil
	}
	var order int
	switch cp.Target {
	case namespace.CmpValue:
		order = bytes.Compare(n.data, cp.Value)
	case namespace.CmpVersion:
		order = cmp.Compare(n.stat.Version, cp.Number)
	case namespace.CmpCreateRev:
		order = cmpRev(n.stat.CreateRev, cp.Number)
	case namespace.CmpModRev:
		order = cmpRev(n.stat.ModRev, cp.Number)
	case namespace.CmpOwner:
		order = cmpRev(n.stat.EphemeralOwner, cp.Number)
	}
	switch cp.Op {
	case namespace.CmpEqual:
		return order == 0, nil
	case namespace.CmpNotEqual:
		return order != 0, nil
	case namespace.CmpGreater:
		return order > 0, nil
	}
	return order < 0, nil
}

// cmpRev compares an unsigned revision or session id with a compare's
// signed number (a negative number is below every revision).
func cmpRev(v uint64, n int64) int {
	if n < 0 {
		return 1
	}
	return cmp.Compare(v, uint64(n))
}

// get is OpGet inside a txn: the node as the earlier ops left it.
func (c *cmdCtx) get(op *namespace.Command, r *namespace.Result) error {
	if err := c.authorize(op.Path, namespace.PermRead); err != nil {
		return err
	}
	n, err := c.existing(op.Path, op.Version)
	if err != nil {
		return err
	}
	r.Data, r.Stat = n.data, n.stat
	if r.Data == nil {
		r.Data = noData // read, and empty
	}
	return nil
}

// runOps applies ops in order against the command's overlay, so later ops
// see earlier ones; the first failure fails the whole command, and the
// overlay (everything the earlier ops did) is dropped by the caller.
// r.Results has one entry per op; on failure only the failing op's entry
// is set, with its Err. what names the op list in errors ("multi",
// "txn then"); gets allows OpGet (a txn's, not a multi's: a multi answers
// no data). Multi and both txn branches run here.
func (c *cmdCtx) runOps(ops []namespace.Command, r *namespace.Result, what string, gets bool) error {
	r.Results = make([]namespace.Result, len(ops))
	read := 0
	for i := range ops {
		op := &ops[i]
		sub := &r.Results[i]
		sub.Index = c.index
		var err error
		switch op.Op {
		case namespace.OpCreate:
			err = c.create(op, sub)
		case namespace.OpSet:
			err = c.set(op, sub)
		case namespace.OpDelete:
			err = c.delete(op)
		case namespace.OpCheck:
			err = c.check(op, sub)
		case namespace.OpGet:
			if !gets {
				err = fmt.Errorf("%w: %s is not allowed in %s", namespace.ErrBadCommand, op.Op, what)
				break
			}
			err = c.get(op, sub)
			if read += len(sub.Data); err == nil && read > maxTxnReadBytes {
				err = fmt.Errorf("%w: the txn's gets read %d bytes > %d", namespace.ErrDataTooLarge, read, maxTxnReadBytes)
			}
		default:
			err = fmt.Errorf("%w: %s is not allowed in %s", namespace.ErrBadCommand, op.Op, what)
		}
		if err != nil {
			for j := range r.Results {
				r.Results[j] = namespace.Result{Index: c.index}
			}
			r.Results[i].Err = err
			return fmt.Errorf("%s op %d (%s): %w", what, i, op.Op, err)
		}
	}
	return nil
}

// noData is the Data of a txn's get of a node with no data: read, and
// empty, not nil.
var noData = []byte{}

// maxTxnReadBytes bounds the node data a txn's gets return, so that the
// answer fits in one frame (session.DefaultMaxFrameSize).
const maxTxnReadBytes = 1 << 20
