package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

func stableKey(key []byte) []byte {
	k := make([]byte, 0, 1+len(key))
	k = append(k, prefixStable)
	return append(k, key...)
}

// Set stores val under key durably.
func (s *Store) Set(key, val []byte) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.closed.Load() {
		return ErrClosed
	}
	v := append([]byte(nil), val...)
	err := s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(stableKey(key), v)
	})
	if err != nil {
		return fmt.Errorf("latch: raft stable set %q: %w", key, err)
	}
	return nil
}

// Get returns the value of key, or ErrKeyNotFound when it was never set.
func (s *Store) Get(key []byte) ([]byte, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	var val []byte
	err := s.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(stableKey(key))
		if err != nil {
			return err
		}
		val, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, ErrKeyNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("latch: raft stable get %q: %w", key, err)
	}
	return val, nil
}

// SetUint64 stores val under key durably.
func (s *Store) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns the value of key, or 0 when it was never set.
func (s *Store) GetUint64(key []byte) (uint64, error) {
	val, err := s.Get(key)
	if errors.Is(err, ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(val) != 8 {
		return 0, fmt.Errorf("latch: raft stable key %q holds %d bytes, want 8", key, len(val))
	}
	return binary.BigEndian.Uint64(val), nil
}
