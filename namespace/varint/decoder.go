// Package varint reads the records latch stores in badger: a format
// byte, then fields as unsigned and signed varints (encoding/binary) and
// uvarint-length-prefixed byte strings. The namespace's records (nodes,
// sessions, members, locks) and the raft log's entries (server/raftstore)
// are read with it; each side writes its records with encoding/binary's
// Append functions.
//
// A Decoder remembers the first error, so a record's decode reads like
// its layout: read every field, then check Err (or Finish, which also
// refuses trailing bytes) once. After an error every read returns the
// zero value. A length beyond the input is an error, never an allocation:
// byte strings alias the input.
//
// It is a leaf package (standard library only) so that both the namespace
// and the server's raft store can use it without importing each other.
package varint

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrTruncated is the error of a read past the end of the input.
var ErrTruncated = errors.New("truncated")

// Decoder reads the fields of one record.
type Decoder struct {
	b   []byte
	err error
}

// NewDecoder reads b. Byte strings it returns alias b.
func NewDecoder(b []byte) *Decoder { return &Decoder{b: b} }

func (d *Decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w %s", ErrTruncated, what)
	}
	d.b = nil
}

// Byte reads one byte.
func (d *Decoder) Byte() byte {
	if len(d.b) == 0 {
		d.fail("byte")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 { return read(d, binary.Uvarint, "uvarint") }

// Varint reads a signed (zig-zag) varint.
func (d *Decoder) Varint() int64 { return read(d, binary.Varint, "varint") }

// read reads one varint with parse (binary.Uvarint or binary.Varint).
func read[T uint64 | int64](d *Decoder, parse func([]byte) (T, int), what string) T {
	v, n := parse(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Bytes reads a uvarint length and that many bytes, aliasing the input
// (capacity capped, so an append to it cannot overwrite what follows). An
// empty string reads as nil: a record written from a nil slice reads back
// equal to it, and nothing aliases the input for no bytes.
func (d *Decoder) Bytes() []byte {
	n := d.Uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("bytes")
		return nil
	}
	if n == 0 {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// Rest returns the unread input (nil after an error), for a record whose
// last field runs to its end.
func (d *Decoder) Rest() []byte { return d.b }

// Err is the first error of a read, or nil.
func (d *Decoder) Err() error { return d.err }

// Finish is Err, or an error when input is left unread: a record that is
// longer than its layout is as corrupt as a short one.
func (d *Decoder) Finish() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	return d.err
}
