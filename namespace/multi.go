package namespace

import "fmt"

// multi applies cmd.Ops in order against the command's overlay, so later
// ops see earlier ones; the first failure fails the whole command, and the
// overlay (everything the earlier ops did) is dropped by the caller.
// Results has one entry per op; on failure only the failing op's entry is
// set, with its Err.
func (c *cmdCtx) multi(cmd *Command, r *Result) error {
	if len(cmd.Ops) > c.limits().MaxMultiOps {
		return fmt.Errorf("%w: %d > %d", ErrTooManyOps, len(cmd.Ops), c.limits().MaxMultiOps)
	}
	r.Results = make([]Result, len(cmd.Ops))
	for i := range cmd.Ops {
		op := &cmd.Ops[i]
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
		default:
			err = fmt.Errorf("%w: %s is not allowed in multi", ErrBadCommand, op.Op)
		}
		if err != nil {
			for j := range r.Results {
				r.Results[j] = Result{Index: c.index}
			}
			r.Results[i].Err = err
			return fmt.Errorf("multi op %d (%s): %w", i, op.Op, err)
		}
	}
	return nil
}
