package namespace

// Result is what one applied command produced.
type Result struct {
	Index   uint64   // the revision (raft index) the command was applied at
	Err     error    // nil, or wraps a sentinel; nothing changed when Err != nil
	Path    string   // created path, with the sequential suffix filled in
	Stat    Stat     // stat of the node after create/set, or checked by OpCheck, or read by a txn's OpGet
	Session uint64   // OpSessionOpen: the new session's id (= Index); expire: the session of this Results entry
	Results []Result // OpMulti, OpTxn: one per op (of the branch that ran); OpSessionExpire: one per session
	// Succeeded (OpTxn): every compare held and the then branch ran (else
	// the else branch); set on failure too, naming the branch that failed.
	Succeeded bool
	Data      []byte  // a txn's OpGet: the node's data (do not modify)
	Events    []Event // in order; empty when Err != nil
	Grants    []Grant // locks this command granted, in revision order; their token is Index
	// HashView (OpHashCheck) is the state as of this command, to hash
	// (Hash) and Release; nil when the command failed.
	HashView StateView
}

// BatchEntry is one raft log entry handed to ApplyBatch.
type BatchEntry struct {
	Index uint64
	Time  int64 // leader time, unix nanoseconds
	Cmd   *Command
}

// Badger tuning: several stores share one test process, and the FSM is
// not the durable record (doc.go), so memory is kept small and writes are

// StateView is a read view of the state at one applied index: the store's
// Snapshot, handed out in Result.HashView.
type StateView interface {
	Index() uint64
	Hash() (StateHash, error)
	Release()
}
