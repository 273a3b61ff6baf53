package server

// The server's parts in subpackages (watch, lease) declare what they need
// of the member as small interfaces; this file gives them the member's.

// AppliedIndex is the index of the last entry the namespace applied (the
// watch hub's watch.Log).
func (f *fsm) AppliedIndex() uint64 { return f.store.AppliedIndex() }

// Restores counts the snapshots installed on this member: each one breaks
// the history of events and replaces the sessions.
func (f *fsm) Restores() uint64 { return f.restores.Load() }
