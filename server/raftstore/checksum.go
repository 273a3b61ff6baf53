package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"sync"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
)

// Every entry the WAL stores carries a CRC-32C of its fields, appended to
// its Extensions as a trailer, because raft-wal checks nothing on read (see
// doc.go, "Verified entries"). The trailer is
//
//	crc32c (4 bytes, little-endian) | trailerMagic | trailerVersion
//
// and the sum covers the index, term, type, AppendedAt, Data and the
// caller's own Extensions, so an entry served at the wrong index, or with
// any of its bytes changed, fails.
const (
	trailerMagic   = 'L'
	trailerVersion = 1
	trailerLen     = 6
)

// checksumFromKey is the stable key that records the first index written
// with a trailer: entries below it were written by a latch that did not
// checksum them, and are served as they are.
var checksumFromKey = []byte("latch.raftlog.checksummed_from")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entrySum is the checksum of l's fields with ext as its Extensions.
func entrySum(l *raft.Log, ext []byte) uint32 {
	return entrySumBuf(l, ext, make([]byte, 0, sumHeaderLen))
}

// sumHeaderLen bounds the header entrySumBuf encodes.
const sumHeaderLen = 5*binary.MaxVarintLen64 + 1

// entrySumBuf is entrySum with hdr (empty, capacity sumHeaderLen) as its
// scratch space: what crc32 reads escapes, so a caller that sums many
// entries passes one buffer for all.
func entrySumBuf(l *raft.Log, ext, hdr []byte) uint32 {
	b := binary.AppendUvarint(hdr[:0], l.Index)
	b = binary.AppendUvarint(b, l.Term)
	b = append(b, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	b = binary.AppendVarint(b, at)
	b = binary.AppendUvarint(b, uint64(len(l.Data)))
	sum := crc32.Update(0, castagnoli, b)
	sum = crc32.Update(sum, castagnoli, l.Data)
	b = binary.AppendUvarint(hdr[:0], uint64(len(ext)))
	sum = crc32.Update(sum, castagnoli, b)
	return crc32.Update(sum, castagnoli, ext)
}

// sealEntry returns l's Extensions with the trailer appended. It does not
// change l: raft keeps its own entries (in its log cache) as they were.
func sealEntry(l *raft.Log) []byte {
	return appendSealed(nil, l, make([]byte, 0, sumHeaderLen))
}

// appendSealed appends l's sealed Extensions to buf, with hdr as
// entrySumBuf's scratch.
func appendSealed(buf []byte, l *raft.Log, hdr []byte) []byte {
	buf = append(buf, l.Extensions...)
	buf = binary.LittleEndian.AppendUint32(buf, entrySumBuf(l, l.Extensions, hdr))
	return append(buf, trailerMagic, trailerVersion)
}

// openEntry checks the trailer of l, read at index, and removes it from
// l.Extensions. An entry below checkedFrom may have none (it predates
// checksums) and is then returned as read.
func openEntry(index, checkedFrom uint64, l *raft.Log) error {
	if l.Index != index {
		return fmt.Errorf("%w: entry %d holds index %d", ErrCorruptLog, index, l.Index)
	}
	ext := l.Extensions
	n := len(ext) - trailerLen
	if n < 0 || ext[n+4] != trailerMagic || ext[n+5] != trailerVersion {
		if index < checkedFrom {
			return nil
		}
		return fmt.Errorf("%w: entry %d has no checksum", ErrCorruptLog, index)
	}
	if got, want := entrySum(l, ext[:n]), binary.LittleEndian.Uint32(ext[n:]); got != want {
		if index < checkedFrom {
			// An old entry whose Extensions happen to end like a trailer.
			return nil
		}
		return fmt.Errorf("%w: entry %d fails its checksum (stored %08x, computed %08x)", ErrCorruptLog, index, want, got)
	}
	if n == 0 {
		l.Extensions = nil
	} else {
		l.Extensions = ext[:n:n]
	}
	return nil
}

// GetLog reads the entry at index and verifies its checksum, or returns
// raft.ErrLogNotFound. A damaged entry is never returned: the error wraps
// ErrCorruptLog, names the index and fails the WAL (Failed), so raft
// neither applies nor replicates it.
func (w *WAL) GetLog(index uint64, l *raft.Log) error {
	first, err := w.WAL.FirstIndex()
	if err != nil {
		return err
	}
	// raft-wal keeps serving entries of its open segment below a head
	// truncation; this keeps the LogStore contract that deleted entries are
	// gone (so a member that fell behind the compacted log gets a snapshot,
	// the path tests and operators expect).
	if index < first {
		return raft.ErrLogNotFound
	}
	err = w.WAL.GetLog(index, l)
	if err == nil {
		err = openEntry(index, w.checkedFrom, l)
	} else if err != raft.ErrLogNotFound && !errors.Is(err, wal.ErrClosed) {
		// raft-wal's own errors for a frame it cannot parse or decode.
		err = fmt.Errorf("%w: entry %d: %w", ErrCorruptLog, index, err)
	}
	if errors.Is(err, ErrCorruptLog) {
		err = fmt.Errorf("%w (in %s)", err, w.segmentFile(index))
		w.corrupt.fail(err)
	}
	return err
}

// segmentFile names the segment file that holds index: raft-wal names
// each <base index>-<segment id>.wal, so it is the one with the greatest
// base index not above index. The directory alone when none parses.
func (w *WAL) segmentFile(index uint64) string {
	files, _ := filepath.Glob(filepath.Join(w.dir, "*.wal"))
	best, bestBase := w.dir, uint64(0)
	for _, f := range files {
		var base, id uint64
		if _, err := fmt.Sscanf(filepath.Base(f), "%d-%x.wal", &base, &id); err != nil {
			continue
		}
		if base <= index && base >= bestBase {
			best, bestBase = f, base
		}
	}
	return best
}

// StoreLog stores one entry with its checksum.
func (w *WAL) StoreLog(l *raft.Log) error {
	return w.StoreLogs([]*raft.Log{l})
}

// StoreLogs stores entries with their checksums, durably, in one write and
// one fsync. A batch costs a fixed few allocations whatever its length:
// raft-wal copies what it stores before it returns, so the sealed copies
// and their trailers share one buffer each.
func (w *WAL) StoreLogs(logs []*raft.Log) error {
	w.watch.begin()
	defer w.watch.end()
	sealed := make([]raft.Log, len(logs))
	ptrs := make([]*raft.Log, len(logs))
	size := 0
	for _, l := range logs {
		size += len(l.Extensions) + trailerLen
	}
	buf := make([]byte, 0, size)
	hdr := make([]byte, 0, sumHeaderLen)
	for i, l := range logs {
		start := len(buf)
		buf = appendSealed(buf, l, hdr)
		sealed[i] = *l
		sealed[i].Extensions = buf[start:len(buf):len(buf)]
		ptrs[i] = &sealed[i]
	}
	return w.WAL.StoreLogs(ptrs)
}

// verifyAll reads every entry of the log, so a member refuses to start on
// a damaged one instead of finding it when raft applies or sends it.
func (w *WAL) verifyAll() error {
	first, err := w.WAL.FirstIndex()
	if err != nil {
		return err
	}
	last, err := w.WAL.LastIndex()
	if err != nil || first == 0 {
		return err
	}
	var l raft.Log
	for i := first; i <= last; i++ {
		if err := w.GetLog(i, &l); err != nil {
			return fmt.Errorf("latch: verify raft log entries %d-%d: %w", first, last, err)
		}
	}
	return nil
}

// loadCheckedFrom reads the first checksummed index, recording it on the
// first open by a latch that checksums: every entry after the current last
// one.
func (w *WAL) loadCheckedFrom() error {
	v, err := w.WAL.Get(checksumFromKey)
	if err != nil {
		return fmt.Errorf("latch: read raft log checksum start: %w", err)
	}
	if len(v) == 8 {
		w.checkedFrom = binary.LittleEndian.Uint64(v)
		return nil
	}
	last, err := w.WAL.LastIndex()
	if err != nil {
		return err
	}
	w.checkedFrom = last + 1
	if err := w.WAL.Set(checksumFromKey, binary.LittleEndian.AppendUint64(nil, w.checkedFrom)); err != nil {
		return fmt.Errorf("latch: record raft log checksum start: %w", err)
	}
	return nil
}

// Failed is closed when a read found a damaged entry while the member ran;
// Err says which. The member must stop: its log cannot be trusted.
func (w *WAL) Failed() <-chan struct{} { return w.corrupt.ch }

// Err returns the damage Failed reports, or nil.
func (w *WAL) Err() error {
	w.corrupt.mu.Lock()
	defer w.corrupt.mu.Unlock()
	return w.corrupt.err
}

// corruption records the first damaged entry found.
type corruption struct {
	mu  sync.Mutex
	err error
	ch  chan struct{}
}

func (c *corruption) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		close(c.ch)
	}
}
