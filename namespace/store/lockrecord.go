package store

import (
	"encoding/binary"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/namespace/varint"
)

// A lock request's record, under lockKey(rev): what the index needs to be
// rebuilt exactly. Which requests are pending and each path's frontier are
// not stored: they follow from the records.
const lockRecordFormat = 1

const (
	lockFlagShared  = 1 << iota
	lockFlagGranted // token, grant time and deadline follow
	lockFlagPhantom // delay end follows
	lockFlagReqID   // the client's request id follows, last
)

func appendLockRecord(b []byte, q *lockReq) []byte {
	var flags byte
	if q.mode == namespace.LockShared {
		flags |= lockFlagShared
	}
	if q.granted {
		flags |= lockFlagGranted
	}
	if q.phantom {
		flags |= lockFlagPhantom
	}
	if q.reqID != "" {
		flags |= lockFlagReqID
	}
	b = append(b, lockRecordFormat, flags)
	b = binary.AppendUvarint(b, q.session)
	b = appendString(b, q.node)
	b = binary.AppendVarint(b, q.holdTTL)
	b = binary.AppendVarint(b, q.delay)
	if q.granted {
		b = binary.AppendUvarint(b, q.token)
		b = binary.AppendVarint(b, q.grantTime)
		b = binary.AppendVarint(b, q.deadline)
	}
	if q.phantom {
		b = binary.AppendVarint(b, q.delayEnd)
	}
	if q.reqID != "" {
		b = appendString(b, q.reqID)
	}
	return b
}

func decodeLockRecord(rev uint64, v []byte) (*lockReq, error) {
	d := varint.NewDecoder(v)
	if f := d.Byte(); f != lockRecordFormat {
		return nil, fmt.Errorf("%w: lock %d format %d", namespace.ErrStorage, rev, f)
	}
	flags := d.Byte()
	q := &lockReq{rev: rev, session: d.Uvarint(), node: string(d.Bytes())}
	q.holdTTL = d.Varint()
	q.delay = d.Varint()
	if flags&lockFlagShared != 0 {
		q.mode = namespace.LockShared
	}
	if flags&lockFlagGranted != 0 {
		q.granted = true
		q.token = d.Uvarint()
		q.grantTime = d.Varint()
		q.deadline = d.Varint()
	}
	if flags&lockFlagPhantom != 0 {
		q.phantom = true
		q.delayEnd = d.Varint()
	}
	if flags&lockFlagReqID != 0 {
		q.reqID = string(d.Bytes())
	}
	if err := d.Finish(); err != nil {
		return nil, fmt.Errorf("%w: lock %d: %v", namespace.ErrStorage, rev, err)
	}
	if q.phantom && !q.granted {
		return nil, fmt.Errorf("%w: lock %d is a phantom but was never granted", namespace.ErrStorage, rev)
	}
	return q, nil
}

// loadLockIndex rebuilds the index from the lock records: the queues in
// revision order (the key order), the timers, and then, from the grant
// rule, each path's frontier and the pending requests.
func loadLockIndex(txn *badger.Txn, clock int64) (*lockIndex, error) {
	ix := newLockIndex()
	prefix := []byte{spaceLock}
	err := scan(txn, prefix, func(k, v []byte) error {
		if len(k) != 9 {
			return fmt.Errorf("%w: lock key %q", namespace.ErrStorage, k)
		}
		q, err := decodeLockRecord(beUint64(k[1:]), v)
		if err != nil {
			return err
		}
		ix.link(q)
		switch {
		case q.phantom:
			ix.setTimer(q, q.delayEnd)
		case q.granted && q.deadline != 0:
			ix.setTimer(q, q.deadline)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, lp := range ix.paths {
		ix.advance(lp, lp.queue.Front())
	}
	err = scan(txn, endingPrefix, func(k, v []byte) error {
		if len(k) != len(endingPrefix)+8 || len(v) != 1 || (lockCause(v[0]) != causeClose && lockCause(v[0]) != causeExpire) {
			return fmt.Errorf("%w: ending session record %q=%x", namespace.ErrStorage, k, v)
		}
		ix.ending[beUint64(k[len(endingPrefix):])] = lockCause(v[0])
		return nil
	})
	if err != nil {
		return nil, err
	}
	ix.clock.Store(clock)
	return ix, nil
}

// loadLocks replaces the store's lock index with one rebuilt from badger.
func (s *Store) loadLocks() error {
	var ix *lockIndex
	err := s.db.View(func(txn *badger.Txn) (err error) {
		ix, err = loadLockIndex(txn, s.clock)
		return err
	})
	if err != nil {
		return fmt.Errorf("%w: load locks: %w", namespace.ErrStorage, err)
	}
	s.locks = ix
	return nil
}
