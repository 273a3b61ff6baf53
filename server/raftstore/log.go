package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"
)

func logKey(buf []byte, index uint64) []byte {
	buf = append(buf, prefixLog)
	return binary.BigEndian.AppendUint64(buf, index)
}

func indexOf(key []byte) uint64 {
	if len(key) != 9 {
		return 0
	}
	return binary.BigEndian.Uint64(key[1:])
}

// FirstIndex returns the first index written, 0 for an empty log.
func (s *Store) FirstIndex() (uint64, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	return s.first.Load(), nil
}

// LastIndex returns the last index written, 0 for an empty log.
func (s *Store) LastIndex() (uint64, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	return s.last.Load(), nil
}

// GetLog reads the entry at index into l, or returns raft.ErrLogNotFound.
func (s *Store) GetLog(index uint64, l *raft.Log) error {
	if s.closed.Load() {
		return ErrClosed
	}
	var key [9]byte
	var val []byte
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(logKey(key[:0], index))
		if err != nil {
			return err
		}
		val, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return fmt.Errorf("latch: read raft log %d: %w", index, err)
	}
	if err := decodeLog(val, l); err != nil {
		return fmt.Errorf("raft log %d: %w", index, err)
	}
	return nil
}

// StoreLog stores one entry.
func (s *Store) StoreLog(l *raft.Log) error {
	return s.StoreLogs([]*raft.Log{l})
}

// StoreLogs stores entries durably, in one fsynced transaction unless the
// batch is larger than badger allows in one.
func (s *Store) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	// Badger keeps references to keys and values until commit, so encode into
	// two buffers sized up front that never reallocate.
	size := 0
	for _, l := range logs {
		size += len(l.Data) + len(l.Extensions) + 48
	}
	vals := make([]byte, 0, size)
	keys := make([]byte, 0, 9*len(logs))
	lo, hi := logs[0].Index, logs[0].Index

	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	txn := s.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	for _, l := range logs {
		k0, v0 := len(keys), len(vals)
		keys = logKey(keys, l.Index)
		vals = encodeLog(vals, l)
		k, v := keys[k0:len(keys):len(keys)], vals[v0:len(vals):len(vals)]
		err := txn.Set(k, v)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err = txn.Commit(); err != nil {
				return fmt.Errorf("latch: store raft logs: %w", err)
			}
			txn = s.db.NewTransaction(true)
			err = txn.Set(k, v)
		}
		if err != nil {
			return fmt.Errorf("latch: store raft log %d: %w", l.Index, err)
		}
		lo, hi = min(lo, l.Index), max(hi, l.Index)
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("latch: store raft logs: %w", err)
	}
	if f := s.first.Load(); f == 0 || lo < f {
		s.first.Store(lo)
	}
	if hi > s.last.Load() {
		s.last.Store(hi)
	}
	return nil
}

// DeleteRange deletes entries min through max inclusive.
func (s *Store) DeleteRange(lo, hi uint64) error {
	if lo > hi {
		return nil
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	// Collect the keys that exist (reading keys only), then delete them.
	var keys [][]byte
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.PrefetchValues = false
		opts.Prefix = []byte{prefixLog}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(logKey(nil, lo)); it.Valid(); it.Next() {
			k := it.Item().KeyCopy(nil)
			if indexOf(k) > hi {
				break
			}
			keys = append(keys, k)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("latch: delete raft logs %d-%d: %w", lo, hi, err)
	}
	txn := s.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	for _, k := range keys {
		err := txn.Delete(k)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err = txn.Commit(); err != nil {
				return fmt.Errorf("latch: delete raft logs %d-%d: %w", lo, hi, err)
			}
			txn = s.db.NewTransaction(true)
			err = txn.Delete(k)
		}
		if err != nil {
			return fmt.Errorf("latch: delete raft logs %d-%d: %w", lo, hi, err)
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("latch: delete raft logs %d-%d: %w", lo, hi, err)
	}
	return s.db.View(func(txn *badger.Txn) error {
		first, last := scanBounds(txn)
		s.first.Store(first)
		s.last.Store(last)
		return nil
	})
}
