package store

import (
	"fmt"
	"strings"

	"github.com/latch-io/latch/namespace"
)

// inCellMap reports whether a component of p is CellMapName.
func inCellMap(p string) bool {
	return strings.HasSuffix(p, "/"+namespace.CellMapName) || strings.Contains(p, "/"+namespace.CellMapName+"/")
}

// checkCellMap refuses a write of the command's identity on a cell map
// node (or below one) unless it is an admin of it.
func (c *cmdCtx) checkCellMap(p string) error {
	t := c.b.acl
	if !t.enforced || !inCellMap(p) || t.perms(c.identity, p)&namespace.PermAdmin != 0 {
		return nil
	}
	return fmt.Errorf("%w: %s: a %s node is the cell map; only an admin may write it", namespace.ErrPermissionDenied, p, namespace.CellMapName)
}
