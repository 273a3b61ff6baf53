package msgp

import (
	"encoding/binary"
	"math"
)

// AppendKey writes a struct field's tag; every tag is shorter than 32
// bytes, so it is a fixstr.
func AppendKey(b []byte, k string) []byte {
	b = append(b, 0xa0|byte(len(k)))
	return append(b, k...)
}

// AppendUint writes an unsigned integer in its smallest form: a positive
// fixint, else uint8..uint64.
func AppendUint(b []byte, v uint64) []byte {
	switch {
	case v <= math.MaxInt8:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xcf), v)
}

// AppendInt writes a signed integer: a fixint (-32..127), else signed
// int8..int64 even when positive, as go-msgpack does for signed types.
func AppendInt(b []byte, v int64) []byte {
	switch {
	case v >= -32 && v <= math.MaxInt8:
		return append(b, byte(v))
	case v >= math.MinInt8 && v < -32:
		return append(b, 0xd0, byte(v))
	case v >= math.MinInt16 && v <= math.MaxInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(v))
	case v >= math.MinInt32 && v <= math.MaxInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
}

// AppendBool writes true or false.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 0xc3)
	}
	return append(b, 0xc2)
}

// AppendStr writes a string as str (str8 included: WriteExt).
func AppendStr(b []byte, s string) []byte {
	if len(s) < 32 {
		return append(append(b, 0xa0|byte(len(s))), s...)
	}
	return append(appendSizedLen(b, 0xd9, len(s)), s...)
}

// AppendBin writes a []byte as bin.
func AppendBin(b []byte, v []byte) []byte {
	return append(appendSizedLen(b, 0xc4, len(v)), v...)
}

// appendSizedLen writes the header of a str or bin of n bytes in its 8-,
// 16- or 32-bit form; first is the 8-bit form's byte (str8 0xd9, bin8
// 0xc4), the wider ones follow it.
func appendSizedLen(b []byte, first byte, n int) []byte {
	switch {
	case n <= math.MaxUint8:
		return append(b, first, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, first+1), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, first+2), uint32(n))
}

// AppendMapLen writes a map header of n entries.
func AppendMapLen(b []byte, n int) []byte { return appendContainerLen(b, 0x80, 0xde, n) }

// AppendArrayLen writes an array header of n elements.
func AppendArrayLen(b []byte, n int) []byte { return appendContainerLen(b, 0x90, 0xdc, n) }

// appendContainerLen writes a map or array header: fix (n < 16), 16-bit
// (b16) or 32-bit (b16+1).
func appendContainerLen(b []byte, fix, b16 byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, fix|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, b16), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, b16+1), uint32(n))
}

// Sizes: what each Append writes, for codecs that size a buffer first.

// KeySize is len(AppendKey(nil, k)).
func KeySize(k string) int { return 1 + len(k) }

// UintSize is len(AppendUint(nil, v)).
func UintSize(v uint64) int {
	switch {
	case v <= math.MaxInt8:
		return 1
	case v <= math.MaxUint8:
		return 2
	case v <= math.MaxUint16:
		return 3
	case v <= math.MaxUint32:
		return 5
	}
	return 9
}

// IntSize is len(AppendInt(nil, v)).
func IntSize(v int64) int {
	switch {
	case v >= -32 && v <= math.MaxInt8:
		return 1
	case v >= math.MinInt8 && v < -32:
		return 2
	case v >= math.MinInt16 && v <= math.MaxInt16:
		return 3
	case v >= math.MinInt32 && v <= math.MaxInt32:
		return 5
	}
	return 9
}

// StrSize is the size of a str of n bytes.
func StrSize(n int) int {
	if n < 32 {
		return 1 + n
	}
	return BinSize(n) // the same header widths
}

// BinSize is the size of a bin of n bytes.
func BinSize(n int) int {
	switch {
	case n <= math.MaxUint8:
		return 2 + n
	case n <= math.MaxUint16:
		return 3 + n
	}
	return 5 + n
}

// ContainerLenSize is the size of a map or array header of n entries.
func ContainerLenSize(n int) int {
	switch {
	case n < 16:
		return 1
	case n <= math.MaxUint16:
		return 3
	}
	return 5
}
