package namespace

import "io"

// Dump writes a canonical, human-readable listing of the whole state: the
// tree with stats and data, sessions with their ephemerals, members and
// meta. Two stores with the same state write the same bytes.
func (s *Store) Dump(w io.Writer) error { return ErrClosed }
