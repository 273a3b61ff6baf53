package session

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
)

// A frame's size bounds the work of decoding it. The msgpack decoder itself
// only bounds its first allocation (MaxInitLen): a 1 MiB body holding an
// array of a million nils would still become a million zeroed structs
// (hundreds of MiB) before any field check ran. So before decoding, scan
// walks the body against the Go type it will fill, without allocating, and
// adds up what the decoder would allocate: slice backing arrays, strings and
// byte slices, pointed-to structs, map entries. A body whose cost exceeds
// decodeBudget(len(body)) is refused with ErrMalformed before the decoder
// runs. The walk is linear in the body (every msgpack header consumes a
// byte, and a count larger than the bytes left is refused at once).
//
// The same walk refuses integers that do not fit the field they fill: the
// decoder converts a uint64 of 2^64-1 into an int64 field as -1, which on
// the wire would mean namespace.AnyVersion.

// Every legitimate message stays well inside the budget: the costliest
// element per encoded byte is a one-byte id in Request.Sessions (8 bytes
// decoded) or a one-character name in Response.Names (17 bytes for 2).
const (
	decodeSlack      = 64 << 10 // fixed allowance: the envelope and small messages
	decodeMultiple   = 8        // bytes of decoded memory allowed per body byte
	mapEntryOverhead = 16       // a Go map's per-entry cost beyond key and value
	genericElemCost  = 16       // an element the target type does not describe
)

// decodeBudget is the most memory decoding a body of n bytes may allocate.
func decodeBudget(n int) int64 { return decodeSlack + decodeMultiple*int64(n) }

// checkDecodeCost returns nil when decoding body into a value of v's type
// stays within decodeBudget and every integer fits its field, else an
// error wrapping ErrMalformed.
func checkDecodeCost(body []byte, v any) error {
	s := scanner{b: body, limit: decodeBudget(len(body))}
	t := reflect.TypeOf(v)
	if err := s.value(t, 0); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return nil
}

type scanner struct {
	b     []byte
	pos   int
	cost  int64
	limit int64
}

func (s *scanner) charge(n int64) error {
	s.cost += n
	if s.cost > s.limit || n < 0 {
		return fmt.Errorf("decoding would allocate over %d bytes for a %d-byte frame", s.limit, len(s.b))
	}
	return nil
}

func (s *scanner) left() int { return len(s.b) - s.pos }

func (s *scanner) next(n int) ([]byte, error) {
	if n < 0 || n > s.left() {
		return nil, fmt.Errorf("truncated value at byte %d", s.pos)
	}
	p := s.b[s.pos : s.pos+n]
	s.pos += n
	return p, nil
}

func (s *scanner) uintN(n int) (uint64, error) {
	p, err := s.next(n)
	if err != nil {
		return 0, err
	}
	switch n {
	case 1:
		return uint64(p[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(p)), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(p)), nil
	}
	return binary.BigEndian.Uint64(p), nil
}

// count reads an n-byte length and checks that at least min bytes per
// element remain, so a hostile count fails before any walk.
func (s *scanner) count(n, perElem int) (int, error) {
	c, err := s.uintN(n)
	if err != nil {
		return 0, err
	}
	if c > uint64(s.left()/perElem) {
		return 0, fmt.Errorf("count %d exceeds the %d bytes left", c, s.left())
	}
	return int(c), nil
}

// value walks one msgpack value that the decoder will store into a value
// of type t (nil: the decoder skips it or fails on it).
func (s *scanner) value(t reflect.Type, depth int) error {
	if depth > maxDecodeDepth {
		return fmt.Errorf("nested deeper than %d", maxDecodeDepth)
	}
	for t != nil && t.Kind() == reflect.Pointer {
		if s.left() > 0 && s.b[s.pos] == 0xc0 { // nil leaves the pointer nil
			s.pos++
			return nil
		}
		t = t.Elem()
		if err := s.charge(int64(t.Size())); err != nil {
			return err
		}
	}
	p, err := s.next(1)
	if err != nil {
		return err
	}
	c := p[0]
	switch {
	case c <= 0x7f:
		return fitsUint(t, uint64(c))
	case c >= 0xe0:
		return fitsInt(t, int64(int8(c)))
	case c >= 0x80 && c <= 0x8f:
		return s.mapBody(t, int(c&0x0f), depth)
	case c >= 0x90 && c <= 0x9f:
		return s.arrayBody(t, int(c&0x0f), depth)
	case c >= 0xa0 && c <= 0xbf:
		return s.bytes(int(c & 0x1f))
	}
	switch c {
	case 0xc0, 0xc2, 0xc3: // nil, false, true
		return nil
	case 0xc4, 0xd9: // bin8, str8
		return s.sized(1)
	case 0xc5, 0xda:
		return s.sized(2)
	case 0xc6, 0xdb:
		return s.sized(4)
	case 0xc7, 0xc8, 0xc9: // ext8/16/32: length, type byte, data
		n, err := s.count([...]int{1, 2, 4}[c-0xc7], 1)
		if err != nil {
			return err
		}
		return s.skipCharge(n + 1)
	case 0xca:
		_, err := s.next(4)
		return err
	case 0xcb:
		_, err := s.next(8)
		return err
	case 0xcc, 0xcd, 0xce, 0xcf:
		u, err := s.uintN(1 << (c - 0xcc))
		if err != nil {
			return err
		}
		return fitsUint(t, u)
	case 0xd0, 0xd1, 0xd2, 0xd3:
		n := 1 << (c - 0xd0)
		u, err := s.uintN(n)
		if err != nil {
			return err
		}
		// sign-extend from n bytes
		shift := 64 - 8*uint(n)
		return fitsInt(t, int64(u<<shift)>>shift)
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1..16: type byte + data
		return s.skipCharge(1 + 1<<(c-0xd4))
	case 0xdc:
		n, err := s.count(2, 1)
		if err != nil {
			return err
		}
		return s.arrayBody(t, n, depth)
	case 0xdd:
		n, err := s.count(4, 1)
		if err != nil {
			return err
		}
		return s.arrayBody(t, n, depth)
	case 0xde:
		n, err := s.count(2, 2)
		if err != nil {
			return err
		}
		return s.mapBody(t, n, depth)
	case 0xdf:
		n, err := s.count(4, 2)
		if err != nil {
			return err
		}
		return s.mapBody(t, n, depth)
	}
	return fmt.Errorf("invalid msgpack byte 0x%02x", c)
}

// sized reads an n-byte length and that many bytes of a string or binary.
func (s *scanner) sized(n int) error {
	l, err := s.count(n, 1)
	if err != nil {
		return err
	}
	return s.bytes(l)
}

func (s *scanner) bytes(l int) error { return s.skipCharge(l) }

func (s *scanner) skipCharge(l int) error {
	if _, err := s.next(l); err != nil {
		return err
	}
	return s.charge(int64(l))
}

func (s *scanner) arrayBody(t reflect.Type, n, depth int) error {
	var elem func(i int) reflect.Type
	switch {
	case t == nil:
		if err := s.charge(int64(n) * genericElemCost); err != nil {
			return err
		}
		elem = func(int) reflect.Type { return nil }
	case t.Kind() == reflect.Slice:
		et := t.Elem()
		if err := s.charge(int64(n) * int64(max(et.Size(), 1))); err != nil {
			return err
		}
		elem = func(int) reflect.Type { return et }
	case t.Kind() == reflect.Array:
		et := t.Elem()
		elem = func(int) reflect.Type { return et }
	case t.Kind() == reflect.Struct: // a struct may arrive as an array of its fields
		fs := fieldsOf(t)
		elem = func(i int) reflect.Type {
			if i < len(fs.ordered) {
				return fs.ordered[i]
			}
			return nil
		}
	default:
		if err := s.charge(int64(n) * genericElemCost); err != nil {
			return err
		}
		elem = func(int) reflect.Type { return nil }
	}
	for i := 0; i < n; i++ {
		if err := s.value(elem(i), depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (s *scanner) mapBody(t reflect.Type, n, depth int) error {
	if t != nil && t.Kind() == reflect.Struct {
		fs := fieldsOf(t)
		for i := 0; i < n; i++ {
			name, ok, err := s.key()
			if err != nil {
				return err
			}
			var ft reflect.Type
			if ok {
				ft = fs.byName[name]
			}
			if err := s.value(ft, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	var kt, vt reflect.Type
	per := int64(2*genericElemCost + mapEntryOverhead)
	if t != nil && t.Kind() == reflect.Map {
		kt, vt = t.Key(), t.Elem()
		per = int64(kt.Size()+vt.Size()) + mapEntryOverhead
	}
	if err := s.charge(int64(n) * per); err != nil {
		return err
	}
	for i := 0; i < 2*n; i++ {
		typ := kt
		if i%2 == 1 {
			typ = vt
		}
		if err := s.value(typ, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// key reads a map key; ok reports whether it was a string (a struct field
// name). A key of another kind is walked and ignored.
func (s *scanner) key() (string, bool, error) {
	if s.left() == 0 {
		return "", false, fmt.Errorf("truncated map at byte %d", s.pos)
	}
	c := s.b[s.pos]
	var n, hdr int
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n, hdr = int(c&0x1f), 1
	case c == 0xd9:
		if s.left() < 2 {
			return "", false, fmt.Errorf("truncated key at byte %d", s.pos)
		}
		n, hdr = int(s.b[s.pos+1]), 2
	default:
		return "", false, s.value(nil, maxDecodeDepth)
	}
	s.pos += hdr
	p, err := s.next(n)
	if err != nil {
		return "", false, err
	}
	return string(p), true, nil
}

func fitsUint(t reflect.Type, u uint64) error {
	if t == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if u > uint64(math.MaxInt64)>>(64-8*t.Size()) {
			return fmt.Errorf("integer %d overflows %s", u, t)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if t.Size() < 8 && u>>(8*t.Size()) != 0 {
			return fmt.Errorf("integer %d overflows %s", u, t)
		}
	}
	return nil
}

func fitsInt(t reflect.Type, i int64) error {
	if t == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		shift := 64 - 8*uint(t.Size())
		if i<<shift>>shift != i {
			return fmt.Errorf("integer %d overflows %s", i, t)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if i < 0 {
			return fmt.Errorf("negative integer %d for %s", i, t)
		}
		return fitsUint(t, uint64(i))
	}
	return nil
}

// structFields is what the walk needs of a struct: its fields by wire name
// (codec tag, else field name) and in declaration order (the order of a
// struct sent as an array).
type structFields struct {
	byName  map[string]reflect.Type
	ordered []reflect.Type
}

var fieldCache sync.Map // reflect.Type -> *structFields

func fieldsOf(t reflect.Type) *structFields {
	if fs, ok := fieldCache.Load(t); ok {
		return fs.(*structFields)
	}
	fs := &structFields{byName: make(map[string]reflect.Type)}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("codec"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fs.byName[name] = f.Type
		fs.ordered = append(fs.ordered, f.Type)
	}
	fieldCache.Store(t, fs)
	return fs
}
