package store

import (
	"encoding/binary"

	"github.com/latch-io/latch/namespace"
)

// Badger key layout; doc.go explains it. The first byte is the key space.
const (
	spaceNode      = 'n' // 'n' parent 0x00 name -> node (stat, counter, data)
	spaceSession   = 's' // 's' id(8, big endian) -> session record
	spaceEphemeral = 'e' // 'e' id(8) path -> empty: the session's ephemerals
	spaceMember    = 'm' // 'm' member id -> member addresses
	spaceMeta      = 'x' // 'x' name -> meta value
	spaceLock      = 'l' // 'l' rev(8, big endian) -> lock request record
	spaceACL       = 'a' // 'a' identity 0x00 prefix -> rights (acl.go)
)

var (
	metaApplied = []byte{spaceMeta, 'a', 'p', 'p', 'l', 'i', 'e', 'd'}
	metaClock   = []byte{spaceMeta, 'c', 'l', 'o', 'c', 'k'}
)

// nodeKey is 'n' + parent + 0x00 + name, so that a node's children are
// exactly the keys under childPrefix(node) and sort by name. The root has
// parent "" and name "".
func nodeKey(p string) []byte {
	return appendNodeKey(make([]byte, 0, len(p)+2), p)
}

// appendNodeKey appends nodeKey(p), which is len(p)+2 bytes or fewer.
func appendNodeKey(k []byte, p string) []byte {
	if p == "/" {
		return append(k, spaceNode, 0)
	}
	parent, name := namespace.Parent(p), namespace.Base(p)
	k = append(k, spaceNode)
	k = append(k, parent...)
	k = append(k, 0)
	return append(k, name...)
}

// childPrefix is the common prefix of the keys of p's children.
func childPrefix(p string) []byte {
	k := make([]byte, 0, len(p)+2)
	k = append(k, spaceNode)
	k = append(k, p...)
	return append(k, 0)
}

// pathOfNodeKey inverts nodeKey.
func pathOfNodeKey(k []byte) string {
	k = k[1:]
	for i, c := range k {
		if c == 0 {
			parent, name := string(k[:i]), string(k[i+1:])
			if parent == "" {
				return "/"
			}
			return namespace.Join(parent, name)
		}
	}
	return ""
}

func sessionKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{spaceSession}, id)
}

func ephemeralPrefix(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{spaceEphemeral}, id)
}

func ephemeralKey(id uint64, p string) []byte {
	return append(ephemeralPrefix(id), p...)
}

func memberKey(id string) []byte {
	return append([]byte{spaceMember}, id...)
}

func beUint64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }

// lockKey orders lock requests by the revision that created them, so
// loading the space in key order rebuilds every queue in order.
func lockKey(rev uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{spaceLock}, rev)
}
