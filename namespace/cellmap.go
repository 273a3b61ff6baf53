package namespace

import (
	"fmt"
	"strings"
)

// CellMapName is the reserved name of the replicated cell map: a
// deployment of cells keeps its map in /<mapcell>/latch-cellmap, and
// clients route every cell by what it says. So once ACLs are enforced
// only an admin of the node may create, change or delete a node of this
// name or anything below it (a lock on it included), whatever rights the
// rules give on its parent; reading it needs the usual r. Before ACLs are
// enforced nothing is reserved (version 1 replays as it did).
const CellMapName = "latch-cellmap"

// inCellMap reports whether a component of p is CellMapName.
func inCellMap(p string) bool {
	return strings.HasSuffix(p, "/"+CellMapName) || strings.Contains(p, "/"+CellMapName+"/")
}

// checkCellMap refuses a write of the command's identity on a cell map
// node (or below one) unless it is an admin of it.
func (c *cmdCtx) checkCellMap(p string) error {
	t := c.b.acl
	if !t.enforced || !inCellMap(p) || t.perms(c.identity, p)&PermAdmin != 0 {
		return nil
	}
	return fmt.Errorf("%w: %s: a %s node is the cell map; only an admin may write it", ErrPermissionDenied, p, CellMapName)
}
