package store

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/latch-io/latch/namespace"
)

// SnapshotSummary describes a snapshot that CheckSnapshot accepted.
type SnapshotSummary struct {
	// Index is the applied index the snapshot holds (its metadata).
	Index uint64
	// Keys counts its records; Nodes, Sessions and Locks those of each
	// kind (Locks counts live requests and lock-delay phantoms).
	Keys, Nodes, Sessions, Locks int
}

// CheckSnapshot reads a snapshot written by Snapshot.WriteTo whole and
// checks what Restore would need to hold, without touching any store, so
// a restore can refuse a bad one before it replaces anything:
//
//   - the format: magic, record framing, bounded lengths, keys in strictly
//     increasing order (no record twice), the CRC-32C over every byte, and
//     nothing after it;
//   - the metadata: the applied index and the clock (8 bytes each) and
//     the root node are present;
//   - every node, session and lock record decodes;
//   - every live lock request belongs to a session the snapshot holds
//     (open, or ended with nodes still being deleted), is the only request
//     on its node, and that node exists as an ephemeral of the same
//     session.
//
// A failure is an error wrapping ErrBadSnapshot that names the record;
// no input makes it panic or allocate more than maxSnapshotRecord per
// record plus a few words per lock request.
func CheckSnapshot(r io.Reader) (SnapshotSummary, error) {
	var sum SnapshotSummary
	in := &crcReader{r: bufio.NewReaderSize(r, 256<<10), crc: crc32.New(crcTable)}
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(in, magic); err != nil || string(magic) != snapshotMagic {
		return sum, fmt.Errorf("%w: not a namespace snapshot", namespace.ErrBadSnapshot)
	}
	var (
		prev                             []byte
		haveApplied, haveClock, haveRoot bool
		sessions                         = map[uint64]bool{} // open, or ending with nodes left (endingKey)
		// Live lock requests, in revision order: node paths are unique.
		locks     []*lockReq
		lockNodes = map[string]uint64{} // node path -> revision of its request
		owners    = map[string]uint64{} // lock request node -> its ephemeral owner
	)
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", namespace.ErrBadSnapshot, fmt.Sprintf(format, a...))
	}
	err := scanSnapshot(in, in.crc, func(k, v []byte) error {
		if prev != nil && bytes.Compare(k, prev) <= 0 {
			return bad("record %q out of order after %q", k, prev)
		}
		prev = k
		sum.Keys++
		switch k[0] {
		case spaceMeta:
			switch {
			case bytes.Equal(k, metaApplied):
				if len(v) != 8 {
					return bad("applied index of %d bytes", len(v))
				}
				haveApplied, sum.Index = true, binary.BigEndian.Uint64(v)
			case bytes.Equal(k, metaClock):
				if len(v) != 8 {
					return bad("clock of %d bytes", len(v))
				}
				haveClock = true
			case len(k) == len(endingPrefix)+8 && bytes.HasPrefix(k, endingPrefix):
				// A session that ended with nodes left: its record is
				// gone, its lock requests go in the next ticks.
				sessions[beUint64(k[len(endingPrefix):])] = true
			}
		case spaceNode:
			n, err := decodeNode(v)
			if err != nil {
				return bad("node %q: %v", pathOfNodeKey(k), err)
			}
			sum.Nodes++
			p := pathOfNodeKey(k)
			if p == "/" {
				haveRoot = true
			}
			if _, ok := lockNodes[p]; ok {
				owners[p] = n.stat.EphemeralOwner
			}
		case spaceSession:
			if len(k) != 9 {
				return bad("session key %q", k)
			}
			id := beUint64(k[1:])
			if _, err := decodeSession(id, v); err != nil {
				return bad("%v", err)
			}
			sessions[id] = true
			sum.Sessions++
		case spaceLock:
			if len(k) != 9 {
				return bad("lock key %q", k)
			}
			q, err := decodeLockRecord(beUint64(k[1:]), v)
			if err != nil {
				return bad("%v", err)
			}
			sum.Locks++
			if q.phantom {
				return nil // its session ended; it only holds the lock-delay
			}
			if other, dup := lockNodes[q.node]; dup {
				return bad("lock requests %d and %d are both on node %s", other, q.rev, q.node)
			}
			lockNodes[q.node] = q.rev
			locks = append(locks, q)
		}
		return nil
	})
	if err != nil {
		return sum, err
	}
	if _, err := in.r.ReadByte(); err != io.EOF {
		return sum, bad("data after the checksum")
	}
	switch {
	case !haveApplied:
		return sum, bad("no applied index (metadata key %q missing)", metaApplied)
	case !haveClock:
		return sum, bad("no clock (metadata key %q missing)", metaClock)
	case !haveRoot:
		return sum, bad("no root node")
	}
	// Lock records sort before nodes and sessions: check them now.
	for _, q := range locks {
		rev, p, sess := q.rev, q.node, q.session
		if !sessions[sess] {
			return sum, bad("lock request %d on %s belongs to session %d, which the snapshot does not hold", rev, p, sess)
		}
		owner, ok := owners[p]
		if !ok {
			return sum, bad("lock request %d: its node %s is missing", rev, p)
		}
		if owner != sess {
			return sum, bad("lock request %d: its node %s is owned by session %d, not %d", rev, p, owner, sess)
		}
	}
	return sum, nil
}
