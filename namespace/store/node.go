package store

import (
	"encoding/binary"
	"fmt"

	"github.com/latch-io/latch/namespace"
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
	d := decoder{b: b}
	if f := d.byte(); f != nodeFormat {
		return nil, fmt.Errorf("%w: node format %d", namespace.ErrStorage, f)
	}
	n := &node{}
	n.stat.CreateRev = d.uvarint()
	n.stat.ModRev = d.uvarint()
	n.stat.Ctime = d.varint()
	n.stat.Mtime = d.varint()
	n.stat.Version = d.varint()
	n.stat.CVersion = d.varint()
	n.stat.EphemeralOwner = d.uvarint()
	n.stat.NumChildren = d.varint()
	n.seq = d.varint()
	if d.err != nil {
		return nil, fmt.Errorf("%w: node: %v", namespace.ErrStorage, d.err)
	}
	n.data = d.b
	n.stat.DataLength = int32(len(n.data))
	return n, nil
}

// decoder reads varint-encoded records, remembering the first error so
// callers check once at the end.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("truncated %s", what)
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail("byte")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// bytes reads a length-prefixed byte string, aliasing the input.
func (d *decoder) bytes() []byte {
	l := d.uvarint()
	if d.err != nil || l > uint64(len(d.b)) {
		d.fail("bytes")
		return nil
	}
	v := d.b[:l:l]
	d.b = d.b[l:]
	return v
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendString(b []byte, v string) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}
