package raftstore

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latch-io/latch/namespace/varint"
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
	d := varint.NewDecoder(b)
	if v := d.Byte(); v != logFormatV1 {
		return fmt.Errorf("%w: format %d", ErrCorruptLog, v)
	}
	l.Index = d.Uvarint()
	l.Term = d.Uvarint()
	l.Type = raft.LogType(d.Byte())
	if at := d.Varint(); at != 0 {
		l.AppendedAt = time.Unix(0, at)
	} else {
		l.AppendedAt = time.Time{}
	}
	l.Data = d.Bytes()
	l.Extensions = d.Bytes()
	if err := d.Finish(); err != nil {
		return fmt.Errorf("%w: %w", ErrCorruptLog, err)
	}
	return nil
}
