package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/latch-io/latch/namespace"
)

// Snapshot format: snapshotMagic, then one record per key in key order
// (uvarint key length, key, uvarint value length, value), then a zero key
// length and the CRC-32C of everything before it, big endian.
const snapshotMagic = "latch-namespace-snapshot-1\n"

// maxSnapshotRecord bounds a record's lengths when reading, so a corrupt
// length cannot allocate without limit.
const maxSnapshotRecord = 64 << 20

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Snapshot is the whole state at one read timestamp.
type Snapshot struct {
	s          *Store
	txn        *badger.Txn
	index      uint64
	generation uint64
}

// Snapshot syncs the store and captures its state; cheap, it only opens a
// read transaction, which later commands do not disturb. Release it when
// done.
func (s *Store) Snapshot() (*Snapshot, error) {
	s.mu.Lock() // so applied matches the transaction's view
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil, namespace.ErrClosed
	}
	if err := s.Sync(); err != nil {
		return nil, err
	}
	s.gate.RLock()
	defer s.gate.RUnlock()
	return &Snapshot{
		s:          s,
		txn:        s.db.NewTransaction(false),
		index:      s.applied.Load(),
		generation: s.generation.Load(),
	}, nil
}

// Index is the applied index the snapshot contains.
func (snap *Snapshot) Index() uint64 { return snap.index }

// WriteTo streams the snapshot. It fails when the store was restored or
// closed since the snapshot was taken, and holds off Restore and Close
// while it runs.
func (snap *Snapshot) WriteTo(w io.Writer) (int64, error) {
	snap.s.gate.RLock()
	defer snap.s.gate.RUnlock()
	if snap.s.closed.Load() {
		return 0, namespace.ErrClosed
	}
	if snap.s.generation.Load() != snap.generation {
		return 0, fmt.Errorf("%w: the state was restored after the snapshot was taken", namespace.ErrBadSnapshot)
	}
	cw := &countingWriter{w: w}
	bw := bufio.NewWriterSize(cw, 256<<10)
	crc := crc32.New(crcTable)
	out := io.MultiWriter(bw, crc)
	if _, err := io.WriteString(out, snapshotMagic); err != nil {
		return cw.n, err
	}
	var hdr []byte
	it := snap.txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 256})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		err := itemValue(item, func(v []byte) error {
			hdr = binary.AppendUvarint(hdr[:0], uint64(len(item.Key())))
			if _, err := out.Write(hdr); err != nil {
				return err
			}
			if _, err := out.Write(item.Key()); err != nil {
				return err
			}
			hdr = binary.AppendUvarint(hdr[:0], uint64(len(v)))
			if _, err := out.Write(hdr); err != nil {
				return err
			}
			_, err := out.Write(v)
			return err
		})
		if err != nil {
			return cw.n, fmt.Errorf("latch: write snapshot: %w", err)
		}
	}
	if _, err := out.Write([]byte{0}); err != nil {
		return cw.n, err
	}
	if _, err := bw.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32())); err != nil {
		return cw.n, err
	}
	err := bw.Flush()
	return cw.n, err
}

// Release frees the snapshot's read transaction.
func (snap *Snapshot) Release() {
	snap.s.gate.RLock()
	defer snap.s.gate.RUnlock()
	if !snap.s.closed.Load() {
		snap.txn.Discard()
	}
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Restore replaces the whole state with a snapshot written by WriteTo,
// including the applied index. The old state is dropped before the
// snapshot is read to the end, so when Restore fails halfway the store is
// broken: it refuses further commands until a Restore succeeds.
func (s *Store) Restore(r io.Reader) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return namespace.ErrClosed
	}
	br := bufio.NewReaderSize(r, 256<<10)
	crc := crc32.New(crcTable)
	in := &crcReader{r: br, crc: crc}
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(in, magic); err != nil || string(magic) != snapshotMagic {
		return fmt.Errorf("%w: not a namespace snapshot", namespace.ErrBadSnapshot)
	}
	// Readers wait for the whole restore: none sees a half-loaded state.
	s.gate.Lock()
	defer s.gate.Unlock()
	s.generation.Add(1)
	s.cache.reset()
	if err := s.db.DropAll(); err != nil {
		s.broken = fmt.Errorf("%w: restore: drop: %w", namespace.ErrStorage, err)
		return s.broken
	}
	if err := s.load(in, crc); err != nil {
		s.broken = fmt.Errorf("%w: restore failed, state is incomplete: %w", namespace.ErrStorage, err)
		return err
	}
	s.broken = nil
	if err := s.loadState(); err != nil {
		s.broken = err
		return err
	}
	// Raft compacts its log behind an installed snapshot, so after Restore
	// returns nothing could replay what badger had not yet written out.
	if err := s.db.Sync(); err != nil {
		s.broken = fmt.Errorf("%w: restore: sync: %w", namespace.ErrStorage, err)
		return s.broken
	}
	return nil
}

func (s *Store) load(in *crcReader, crc hash.Hash32) error {
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	err := scanSnapshot(in, crc, func(key, val []byte) error {
		if err := wb.Set(key, val); err != nil {
			return fmt.Errorf("%w: restore: %w", namespace.ErrStorage, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("%w: restore: %w", namespace.ErrStorage, err)
	}
	return nil
}

// scanSnapshot reads the records after the magic, calling fn for each,
// and then checks the CRC-32C; fn's key and value are its own.
func scanSnapshot(in *crcReader, crc hash.Hash32, fn func(key, val []byte) error) error {
	for {
		klen, err := binary.ReadUvarint(in)
		if err != nil {
			return fmt.Errorf("%w: key length: %w", namespace.ErrBadSnapshot, err)
		}
		if klen == 0 {
			break
		}
		key, err := readRecord(in, klen)
		if err != nil {
			return err
		}
		vlen, err := binary.ReadUvarint(in)
		if err != nil {
			return fmt.Errorf("%w: value length: %w", namespace.ErrBadSnapshot, err)
		}
		val, err := readRecord(in, vlen)
		if err != nil {
			return err
		}
		if err := fn(key, val); err != nil {
			return err
		}
	}
	want := crc.Sum32()
	var sum [4]byte
	if _, err := io.ReadFull(in.r, sum[:]); err != nil {
		return fmt.Errorf("%w: checksum: %w", namespace.ErrBadSnapshot, err)
	}
	if got := binary.BigEndian.Uint32(sum[:]); got != want {
		return fmt.Errorf("%w: checksum %08x, want %08x", namespace.ErrBadSnapshot, got, want)
	}
	return nil
}

func readRecord(in io.Reader, n uint64) ([]byte, error) {
	if n > maxSnapshotRecord {
		return nil, fmt.Errorf("%w: record of %d bytes", namespace.ErrBadSnapshot, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(in, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%w: %w", namespace.ErrBadSnapshot, err)
	}
	return b, nil
}

// crcReader checksums what it reads; it is an io.ByteReader for varints.
type crcReader struct {
	r   *bufio.Reader
	crc hash.Hash32
	one [1]byte
}

func (c *crcReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.crc.Write(p[:n])
	return n, err
}

func (c *crcReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.one[0] = b
		c.crc.Write(c.one[:])
	}
	return b, err
}
