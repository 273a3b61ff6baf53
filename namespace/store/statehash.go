package store

import (
	"crypto/sha256"

	"github.com/latch-io/latch/namespace"
)

// Hash hashes the snapshot's state. It reads the whole state, checking
// every value's checksum on the way.
func (snap *Snapshot) Hash() (namespace.StateHash, error) {
	sum := sha256.New()
	if _, err := snap.WriteTo(sum); err != nil {
		return namespace.StateHash{}, err
	}
	var h namespace.StateHash
	copy(h[:], sum.Sum(nil))
	return h, nil
}

// readView returns a Snapshot of the committed state without syncing; the
// caller holds mu, so it is the state as of the applied index.
func (s *Store) readView() *Snapshot {
	s.gate.RLock()
	defer s.gate.RUnlock()
	return &Snapshot{s: s, txn: s.db.NewTransaction(false), index: s.applied.Load(), generation: s.generation.Load()}
}
