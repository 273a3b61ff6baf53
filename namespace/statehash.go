package namespace

import (
	"crypto/sha256"
	"fmt"
)

// OpHashCheck marks a point in the log at which every member hashes its
// state (server/raftnode/hashcheck.go compares the hashes across members). It
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
