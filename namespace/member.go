package namespace

// Members returns the recorded cluster members ordered by ID.
func (s *Store) Members() ([]Member, error) { return nil, ErrClosed }
