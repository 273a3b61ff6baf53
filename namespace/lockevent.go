package namespace

// LockEvent is one entry of a lock's history.
type LockEvent struct {
	// Seq orders the whole history; Rev is the revision (raft index) of
	// the command that granted or ended the lock.
	Seq uint64 `codec:"q" json:"seq"`
	Rev uint64 `codec:"r" json:"rev"`
	// Event is "granted", or how the hold ended: "released", "canceled",
	// "session-closed", "session-expired", "hold-ttl-expired" or "deleted"
	// (the request node was deleted, by an admin or its owner).
	Event string   `codec:"e" json:"event"`
	Path  string   `codec:"p" json:"path"`
	Node  string   `codec:"n" json:"node"`
	Mode  LockMode `codec:"m" json:"mode"`
	Token uint64   `codec:"t" json:"token"`
	// Session held the lock; Identity is that session's client identity.
	Session  uint64 `codec:"s" json:"session"`
	Identity string `codec:"i,omitempty" json:"identity,omitempty"`
	// By is the identity of the command that deleted the node ("deleted").
	By string `codec:"b,omitempty" json:"by,omitempty"`
	// Time is the leader time of the event, GrantTime that of the grant
	// (unix ns).
	Time      int64 `codec:"tm" json:"time"`
	GrantTime int64 `codec:"gt" json:"grant_time"`
}
