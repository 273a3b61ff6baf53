package msgp

import (
	"bytes"
	"encoding/binary"
	"math"
)

// Reader reads msgpack from a byte slice. A read that meets anything the
// Reader does not take marks it failed and returns a zero value; every
// later read is then a no-op, so a caller checks OK once at the end.
type Reader struct {
	b   []byte
	off int
	bad bool
}

// NewReader returns a Reader of b. Str copies; Raw and Key return views
// into b.
func NewReader(b []byte) Reader { return Reader{b: b} }

// OK reports whether every read so far succeeded.
func (r *Reader) OK() bool { return !r.bad }

// Fail marks the read failed: a caller met a field or form it declines.
func (r *Reader) Fail() { r.bad = true }

// Done reports whether every read succeeded and consumed all of b.
func (r *Reader) Done() bool { return !r.bad && r.off == len(r.b) }

// next reads n bytes, or fails (a length larger than what is left
// allocates nothing).
func (r *Reader) next(n int) []byte {
	if r.bad || n < 0 || n > len(r.b)-r.off {
		r.bad = true
		return nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

func (r *Reader) byte() byte {
	if r.bad || r.off >= len(r.b) {
		r.bad = true
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

// MapLen reads a map header. Every entry takes at least two bytes: a
// count beyond that fails before any loop.
func (r *Reader) MapLen() int { return r.containerLen(0x80, 0xde, 2) }

// ArrayLen reads an array header. Every element takes at least a byte.
func (r *Reader) ArrayLen() int { return r.containerLen(0x90, 0xdc, 1) }

func (r *Reader) containerLen(fix, b16 byte, unit int) int {
	c := r.byte()
	var n int
	switch {
	case r.bad:
		return 0
	case c&0xf0 == fix:
		n = int(c & 0x0f)
	case c == b16:
		n = r.beUint(2)
	case c == b16+1:
		n = r.beUint(4)
	default:
		r.bad = true
		return 0
	}
	if n > (len(r.b)-r.off)/unit {
		r.bad = true
		return 0
	}
	return n
}

func (r *Reader) beUint(n int) int {
	p := r.next(n)
	switch len(p) {
	case 1:
		return int(p[0])
	case 2:
		return int(binary.BigEndian.Uint16(p))
	case 4:
		return int(binary.BigEndian.Uint32(p))
	}
	return 0
}

func (r *Reader) be64() uint64 {
	p := r.next(8)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint64(p)
}

// Key reads a field name (a str) as a view into b: a switch on
// string(key) allocates nothing.
func (r *Reader) Key() []byte {
	c := r.byte()
	if c >= 0xa0 && c <= 0xbf && !r.bad {
		return r.next(int(c & 0x1f))
	}
	return r.next(r.sizedLen(c, 0xd9))
}

// SortedKey reads a map key that must sort after prev, the map's key
// before it (nil for the first), else fails. go-msgpack writes a struct's
// fields in sorted order, so a decoder taking only that order meets each
// field at most once without counting them; a repeated or unsorted key
// declines the body to the reflection decoder.
func (r *Reader) SortedKey(prev []byte) []byte {
	k := r.Key()
	if bytes.Compare(k, prev) <= 0 {
		r.bad = true
	}
	return k
}

// Str reads a str into a new string.
func (r *Reader) Str() string { return string(r.Key()) }

// Bin reads a bin into a new slice; empty is []byte{}, not nil, as
// go-msgpack decodes it.
func (r *Reader) Bin() []byte {
	p := r.next(r.sizedLen(r.byte(), 0xc4))
	if r.bad {
		return nil
	}
	return append([]byte{}, p...)
}

// sizedLen reads the length after header c of a str or bin in its 8-,
// 16- or 32-bit form (first is the 8-bit form's byte: str8 0xd9, bin8
// 0xc4); any other header fails the read.
func (r *Reader) sizedLen(c, first byte) int {
	if r.bad || c < first || c > first+2 {
		r.bad = true
		return 0
	}
	return r.beUint(1 << (c - first))
}

// Uint reads an integer for an unsigned field whose largest value is max.
// It fails on a signed form (go-msgpack's encoder writes unsigned types
// unsigned) and on a value above max.
func (r *Reader) Uint(max uint64) uint64 {
	c := r.byte()
	var v uint64
	switch {
	case r.bad:
		return 0
	case c <= 0x7f:
		v = uint64(c)
	case c == 0xcc:
		v = uint64(r.beUint(1))
	case c == 0xcd:
		v = uint64(r.beUint(2))
	case c == 0xce:
		v = uint64(r.beUint(4))
	case c == 0xcf:
		v = r.be64()
	default:
		r.bad = true
	}
	if r.bad || v > max {
		r.bad = true
		return 0
	}
	return v
}

// Int reads an integer for a signed field of the given bits (8..64). It
// fails on a value that does not fit, an unsigned one above the type's
// maximum included (go-msgpack would wrap it).
func (r *Reader) Int(bits uint) int64 {
	c := r.byte()
	var v int64
	hi := int64(math.MaxInt64 >> (64 - bits))
	switch {
	case r.bad:
		return 0
	case c <= 0x7f || c >= 0xe0:
		v = int64(int8(c))
	case c >= 0xcc && c <= 0xcf:
		r.off--
		u := r.Uint(math.MaxUint64)
		if u > uint64(hi) {
			r.bad = true
		}
		v = int64(u)
	case c == 0xd0:
		v = int64(int8(r.beUint(1)))
	case c == 0xd1:
		v = int64(int16(r.beUint(2)))
	case c == 0xd2:
		v = int64(int32(r.beUint(4)))
	case c == 0xd3:
		v = int64(r.be64())
	default:
		r.bad = true
	}
	if r.bad || v > hi || v < -hi-1 {
		r.bad = true
		return 0
	}
	return v
}

// Bool reads true or false.
func (r *Reader) Bool() bool {
	switch c := r.byte(); {
	case r.bad:
		return false
	case c == 0xc3:
		return true
	case c == 0xc2:
		return false
	}
	r.bad = true
	return false
}
