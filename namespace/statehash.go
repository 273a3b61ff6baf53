package namespace

import (
	"crypto/sha256"
	"fmt"
)

// OpHashCheck marks a point in the log at which every member hashes its
// state (server/hashcheck.go compares the hashes across members). It
// changes nothing but the applied index; ApplyBatch commits the state up
// to it and hands back a read view of exactly that state in
// Result.HashView, so the hash is computed off the apply path while later
// commands go on.
const OpHashCheck Op = 16

// StateHash is the SHA-256 of a snapshot's stream: every key and value of
// the state in key order (applied index and clock included), so two
// members have equal hashes at an index exactly when their states there
// are equal.
type StateHash [sha256.Size]byte

func (h StateHash) String() string { return fmt.Sprintf("%x", h[:]) }

// Hash hashes the snapshot's state. It reads the whole state, checking
// every value's checksum on the way.
func (snap *Snapshot) Hash() (StateHash, error) {
	sum := sha256.New()
	if _, err := snap.WriteTo(sum); err != nil {
		return StateHash{}, err
	}
	var h StateHash
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
