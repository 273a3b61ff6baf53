package store

import (
	"encoding/binary"
	"fmt"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/namespace/varint"
)

// node is a stored node. DataLength in its Stat is derived from data.
type node struct {
	stat namespace.Stat
	seq  int64 // next sequential child number
	data []byte
}

// nodeFormat versions the encoding so a later format can be told apart.
const nodeFormat = 1

// appendNode encodes n compactly and deterministically: a format byte,
// varints for the stat and counter, then the data.
func appendNode(b []byte, n *node) []byte {
	b = append(b, nodeFormat)
	b = binary.AppendUvarint(b, n.stat.CreateRev)
	b = binary.AppendUvarint(b, n.stat.ModRev)
	b = binary.AppendVarint(b, n.stat.Ctime)
	b = binary.AppendVarint(b, n.stat.Mtime)
	b = binary.AppendVarint(b, n.stat.Version)
	b = binary.AppendVarint(b, n.stat.CVersion)
	b = binary.AppendUvarint(b, n.stat.EphemeralOwner)
	b = binary.AppendVarint(b, n.stat.NumChildren)
	b = binary.AppendVarint(b, n.seq)
	return append(b, n.data...)
}

// decodeNode decodes b, keeping a reference to it for the data.
func decodeNode(b []byte) (*node, error) {
	d := varint.NewDecoder(b)
	if f := d.Byte(); f != nodeFormat {
		return nil, fmt.Errorf("%w: node format %d", namespace.ErrStorage, f)
	}
	n := &node{}
	n.stat.CreateRev = d.Uvarint()
	n.stat.ModRev = d.Uvarint()
	n.stat.Ctime = d.Varint()
	n.stat.Mtime = d.Varint()
	n.stat.Version = d.Varint()
	n.stat.CVersion = d.Varint()
	n.stat.EphemeralOwner = d.Uvarint()
	n.stat.NumChildren = d.Varint()
	n.seq = d.Varint()
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("%w: node: %v", namespace.ErrStorage, err)
	}
	n.data = d.Rest()
	n.stat.DataLength = int32(len(n.data))
	return n, nil
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendString(b []byte, v string) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}
