package namespace

import (
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
