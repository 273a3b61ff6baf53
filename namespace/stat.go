package namespace

// Stat is a node's metadata.
type Stat struct {
	CreateRev, ModRev uint64 // raft index of the command that created / last set the node
	Ctime, Mtime      int64  // leader time, unix nanoseconds
	Version           int64  // data version: 0 on create, +1 per set
	CVersion          int64  // children version: +1 per child created or deleted
	EphemeralOwner    uint64 // owning session id, or 0 for a persistent node
	NumChildren       int64
	DataLength        int32
}
