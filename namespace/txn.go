package namespace

import (
	"bytes"
	"cmp"
	"fmt"
)

// Conditional transactions (etcd's Txn, ZooKeeper's multi with an else):
// OpTxn evaluates Command.Compares against the state, then applies
// Command.Ops (all compares hold) or Command.Else (any fails), all or
// nothing, in the one command, so "create if absent, else read it" or "set
// if the value is still X" is one round trip and no race. Ops numbers
// 30-34 are the txn workstream's.
const (
	// OpTxn: if Compares then Ops else Else. Result.Succeeded says which
	// branch ran, Result.Results has one entry per op of that branch.
	OpTxn Op = 30
	// OpGet reads Path (Result.Data, Result.Stat); only inside a txn.
	OpGet Op = 31
)

// maxTxnReadBytes bounds the node data a txn's gets return, so that the
// answer fits in one frame (session.DefaultMaxFrameSize).
const maxTxnReadBytes = 1 << 20

// CmpTarget is what a Compare reads from its node. Values are a storage
// format (raft log): never renumber.
type CmpTarget uint8

// Compare targets.
const (
	CmpValue     CmpTarget = 1 // the node's data, against Compare.Value, as bytes
	CmpVersion   CmpTarget = 2 // data version, against Compare.Number
	CmpCreateRev CmpTarget = 3 // create revision
	CmpModRev    CmpTarget = 4 // modify revision
	CmpExists    CmpTarget = 5 // Number 1: the node exists, 0: it does not (equal, not-equal only)
	CmpOwner     CmpTarget = 6 // ephemeral owner session (0: persistent)
)

var cmpTargetNames = [...]string{
	CmpValue: "value", CmpVersion: "version", CmpCreateRev: "create_rev", CmpModRev: "mod_rev",
	CmpExists: "exists", CmpOwner: "owner",
}

func (t CmpTarget) String() string {
	if int(t) < len(cmpTargetNames) && cmpTargetNames[t] != "" {
		return cmpTargetNames[t]
	}
	return fmt.Sprintf("target(%d)", uint8(t))
}

// ParseCmpTarget reads a target's name (value, version, create_rev,
// mod_rev, exists, owner).
func ParseCmpTarget(s string) (CmpTarget, error) {
	for i, n := range cmpTargetNames {
		if n != "" && n == s {
			return CmpTarget(i), nil
		}
	}
	return 0, fmt.Errorf("%w: compare target %q is not value, version, create_rev, mod_rev, exists or owner", ErrBadCommand, s)
}

// CmpOp is how a Compare compares. Values are a storage format.
type CmpOp uint8

// Compare operators; the zero value is equal.
const (
	CmpEqual CmpOp = iota
	CmpNotEqual
	CmpGreater
	CmpLess
)

var cmpOpNames = [...]string{CmpEqual: "=", CmpNotEqual: "!=", CmpGreater: ">", CmpLess: "<"}

func (o CmpOp) String() string {
	if int(o) < len(cmpOpNames) {
		return cmpOpNames[o]
	}
	return fmt.Sprintf("cmp(%d)", uint8(o))
}

// ParseCmpOp reads =, !=, > or <.
func ParseCmpOp(s string) (CmpOp, error) {
	for i, n := range cmpOpNames {
		if n == s {
			return CmpOp(i), nil
		}
	}
	return 0, fmt.Errorf("%w: compare operator %q is not =, !=, > or <", ErrBadCommand, s)
}

// Compare is one condition of a txn: Path's Target, Op, Value (CmpValue)
// or Number (the others). A compare of any target but CmpExists on a node
// that does not exist is false. The tags are a storage format.
type Compare struct {
	Path   string    `codec:"p"`
	Target CmpTarget `codec:"t"`
	Op     CmpOp     `codec:"c,omitempty"`
	Value  []byte    `codec:"v,omitempty"`
	Number int64     `codec:"n,omitempty"`
}

func (c Compare) String() string {
	if c.Target == CmpValue {
		return fmt.Sprintf("%s %s %s %q", c.Target, c.Path, c.Op, c.Value)
	}
	return fmt.Sprintf("%s %s %s %d", c.Target, c.Path, c.Op, c.Number)
}

// Validate rejects a compare that can never be evaluated: an unknown
// target or operator, an ordering of existence, an existence other than
// 0 or 1.
func (c Compare) Validate() error {
	switch {
	case c.Target < CmpValue || c.Target > CmpOwner:
		return fmt.Errorf("%w: unknown compare target %d", ErrBadCommand, c.Target)
	case c.Op > CmpLess:
		return fmt.Errorf("%w: unknown compare operator %d", ErrBadCommand, c.Op)
	case c.Target == CmpExists && c.Op != CmpEqual && c.Op != CmpNotEqual:
		return fmt.Errorf("%w: exists compares with = or != only", ErrBadCommand)
	case c.Target == CmpExists && c.Number != 0 && c.Number != 1:
		return fmt.Errorf("%w: exists compares with 1 (exists) or 0 (absent), not %d", ErrBadCommand, c.Number)
	case c.Target != CmpValue && len(c.Value) > 0:
		return fmt.Errorf("%w: %s compares a number, not a value", ErrBadCommand, c.Target)
	}
	return nil
}

// txnOpAllowed reports whether op may be in a txn branch.
func txnOpAllowed(op Op) bool {
	switch op {
	case OpCreate, OpSet, OpDelete, OpCheck, OpGet:
		return true
	}
	return false
}

// txn applies OpTxn: the compares decide the branch, which runs as a
// multi does (runOps); a failing op fails the whole command.
func (c *cmdCtx) txn(cmd *Command, r *Result) error {
	l := c.limits()
	if n := len(cmd.Ops) + len(cmd.Else); n > l.MaxMultiOps {
		return fmt.Errorf("%w: %d then+else ops > %d", ErrTooManyOps, n, l.MaxMultiOps)
	}
	if len(cmd.Compares) > l.MaxMultiOps {
		return fmt.Errorf("%w: %d compares > %d", ErrTooManyOps, len(cmd.Compares), l.MaxMultiOps)
	}
	// Every op of both branches is checked before anything runs, so a
	// bad op fails the txn whichever branch the state picks.
	for _, ops := range [2][]Command{cmd.Ops, cmd.Else} {
		for i := range ops {
			if !txnOpAllowed(ops[i].Op) {
				return fmt.Errorf("%w: %s is not allowed in a txn", ErrBadCommand, ops[i].Op)
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
func (c *cmdCtx) compare(cp *Compare) (bool, error) {
	if err := cp.Validate(); err != nil {
		return false, err
	}
	if err := ValidatePath(cp.Path, c.limits()); err != nil {
		return false, err
	}
	if err := c.authorize(cp.Path, PermRead); err != nil {
		return false, err
	}
	n, err := c.node(cp.Path)
	if err != nil {
		return false, err
	}
	if cp.Target == CmpExists {
		exists := int64(0)
		if n != nil {
			exists = 1
		}
		return (exists == cp.Number) == (cp.Op == CmpEqual), nil
	}
	if n == nil {
		return false, nil
	}
	var order int
	switch cp.Target {
	case CmpValue:
		order = bytes.Compare(n.data, cp.Value)
	case CmpVersion:
		order = cmp.Compare(n.stat.Version, cp.Number)
	case CmpCreateRev:
		order = cmpRev(n.stat.CreateRev, cp.Number)
	case CmpModRev:
		order = cmpRev(n.stat.ModRev, cp.Number)
	case CmpOwner:
		order = cmpRev(n.stat.EphemeralOwner, cp.Number)
	}
	switch cp.Op {
	case CmpEqual:
		return order == 0, nil
	case CmpNotEqual:
		return order != 0, nil
	case CmpGreater:
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
func (c *cmdCtx) get(op *Command, r *Result) error {
	if err := c.authorize(op.Path, PermRead); err != nil {
		return err
	}
	n, err := c.existing(op.Path, op.Version)
	if err != nil {
		return err
	}
	r.Data, r.Stat = n.data, n.stat
	if r.Data == nil {
		r.Data = noBytes // read, and empty
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
func (c *cmdCtx) runOps(ops []Command, r *Result, what string, gets bool) error {
	r.Results = make([]Result, len(ops))
	read := 0
	for i := range ops {
		op := &ops[i]
		sub := &r.Results[i]
		sub.Index = c.index
		var err error
		switch op.Op {
		case OpCreate:
			err = c.create(op, sub)
		case OpSet:
			err = c.set(op, sub)
		case OpDelete:
			err = c.delete(op)
		case OpCheck:
			err = c.check(op, sub)
		case OpGet:
			if !gets {
				err = fmt.Errorf("%w: %s is not allowed in %s", ErrBadCommand, op.Op, what)
				break
			}
			err = c.get(op, sub)
			if read += len(sub.Data); err == nil && read > maxTxnReadBytes {
				err = fmt.Errorf("%w: the txn's gets read %d bytes > %d", ErrDataTooLarge, read, maxTxnReadBytes)
			}
		default:
			err = fmt.Errorf("%w: %s is not allowed in %s", ErrBadCommand, op.Op, what)
		}
		if err != nil {
			for j := range r.Results {
				r.Results[j] = Result{Index: c.index}
			}
			r.Results[i].Err = err
			return fmt.Errorf("%s op %d (%s): %w", what, i, op.Op, err)
		}
	}
	return nil
}
