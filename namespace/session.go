package namespace

// SessionInfo is a session as recorded in the namespace.
type SessionInfo struct {
	ID        uint64
	Secret    []byte
	TTLMillis int64
	Identity  string
	OpenRev   uint64
	OpenTime  int64
}

// Session returns the session id, or an error wrapping ErrNoSession.
func (s *Store) Session(id uint64) (SessionInfo, error) { return SessionInfo{}, ErrClosed }

// Sessions returns every open session ordered by id.
func (s *Store) Sessions() ([]SessionInfo, error) { return nil, ErrClosed }
