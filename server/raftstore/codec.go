package raftstore

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// logFormatV1 is the first byte of every stored entry, so the format can change
// without guessing what an old record holds.
const logFormatV1 = 1

// encodeLog appends the binary record of l to buf and returns it.
func encodeLog(buf []byte, l *raft.Log) []byte {
	buf = append(buf, logFormatV1)
	buf = binary.AppendUvarint(buf, l.Index)
	buf = binary.AppendUvarint(buf, l.Term)
	buf = append(buf, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	buf = binary.AppendVarint(buf, at)
	buf = binary.AppendUvarint(buf, uint64(len(l.Data)))
	buf = append(buf, l.Data...)
	buf = binary.AppendUvarint(buf, uint64(len(l.Extensions)))
	buf = append(buf, l.Extensions...)
	return buf
}

// decodeLog fills l from b. Data and Extensions alias b, so b must be owned by
// the caller (a copy out of badger, never badger's own buffer).
func decodeLog(b []byte, l *raft.Log) error {
	d := decoder{b: b}
	if v := d.byte(); v != logFormatV1 {
		return fmt.Errorf("%w: format %d", ErrCorruptLog, v)
	}
	l.Index = d.uvarint()
	l.Term = d.uvarint()
	l.Type = raft.LogType(d.byte())
	if at := d.varint(); at != 0 {
		l.AppendedAt = time.Unix(0, at)
	} else {
		l.AppendedAt = time.Time{}
	}
	l.Data = d.bytes()
	l.Extensions = d.bytes()
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorruptLog, len(d.b))
	}
	return nil
}

// decoder reads the fields of a record and remembers the first error, so
// decodeLog reads like the layout it parses.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated %s", ErrCorruptLog, what)
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail("byte")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
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

func (d *decoder) bytes() []byte {
	n := d.uvarint()
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
