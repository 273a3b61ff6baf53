package namespace

// CellMapName is the reserved name of the replicated cell map: a
// deployment of cells keeps its map in /<mapcell>/latch-cellmap, and
// clients route every cell by what it says. So once ACLs are enforced
// only an admin of the node may create, change or delete a node of this
// name or anything below it (a lock on it included), whatever rights the
// rules give on its parent; reading it needs the usual r. Before ACLs are
// enforced nothing is reserved (version 1 replays as it did).
const CellMapName = "latch-cellmap"
