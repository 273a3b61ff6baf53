package namespace

// Get returns a node's data and stat.
func (s *Store) Get(path string) ([]byte, Stat, error) { return nil, Stat{}, ErrClosed }

// Stat returns a node's stat.
func (s *Store) Stat(path string) (Stat, error) { return Stat{}, ErrClosed }

// Exists reports whether a node exists, with its stat when it does.
func (s *Store) Exists(path string) (bool, Stat, error) { return false, Stat{}, ErrClosed }

// Children returns the sorted names of path's children that sort after
// after ("" for the first page), at most limit of them (limit <= 0 or above
// Limits.MaxChildrenPage means MaxChildrenPage); more reports whether
// further names follow.
func (s *Store) Children(path, after string, limit int) (names []string, more bool, err error) {
	return nil, false, ErrClosed
}
