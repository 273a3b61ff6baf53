package store

import (
	"fmt"

	"github.com/latch-io/latch/namespace"
)

// multi applies cmd.Ops all or nothing: a txn without compares or else
// whose ops are create, set, delete and check (runOps, txn.go).
func (c *cmdCtx) multi(cmd *namespace.Command, r *namespace.Result) error {
	if len(cmd.Ops) > c.limits().MaxMultiOps {
		return fmt.Errorf("%w: %d > %d", namespace.ErrTooManyOps, len(cmd.Ops), c.limits().MaxMultiOps)
	}
	return c.runOps(cmd.Ops, r, "multi", false)
}
