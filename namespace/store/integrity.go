package store

import (
	"errors"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/latch-io/latch/namespace"
)

// A store never serves what it did not apply, nor bytes it cannot verify:
//
//   - badger verifies checksums: every table, whole, when it is opened
//     (ChecksumVerificationMode; tables never change once written), and
//     every value read from the value log (VerifyValueChecksum; badger
//     reports a mismatch only by logging it and yielding an empty value,
//     which valueCopy and itemValue turn into an error). Open reads the
//     whole state once, so a store whose files were damaged while it was
//     down refuses to open instead of answering with wrong bytes. Damage
//     to a table while the store runs is left to the cross-member state
//     hash check (server/raftnode/hashcheck.go).
//   - Any storage error (a failed read or commit, a checksum mismatch, a
//     record that does not decode) is a fault: it is recorded once, Failed
//     is closed, and the store refuses every later command. A command that
//     met one is not applied: ApplyBatch discards the whole batch, so the
//     applied index stays where it was and a restart replays the entries
//     from the log (onto an intact store, once an operator has replaced
//     the damaged one).
//
// The server stops serving when Failed closes.

// Failed is closed when the store met a storage error; Err tells which.
func (s *Store) Failed() <-chan struct{} { return s.failed }

// Err returns the first storage error the store met, or nil.
func (s *Store) Err() error {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	return s.faultErr
}

// fault records a storage error and returns it.
func (s *Store) fault(err error) error {
	if !errors.Is(err, namespace.ErrStorage) {
		err = fmt.Errorf("%w: %w", namespace.ErrStorage, err)
	}
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	if s.faultErr == nil {
		s.faultErr = err
		close(s.failed)
	}
	return err
}

// verify reads every key and value once, so that badger checks every
// block and value checksum.
func (s *Store) verify() error {
	var keys int
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{PrefetchValues: false, AllVersions: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := itemValue(it.Item(), func([]byte) error { return nil }); err != nil {
				return fmt.Errorf("key %q: %w", it.Item().Key(), err)
			}
			keys++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: verify after %d keys: %w", namespace.ErrStorage, keys, err)
	}
	return nil
}

// valueCopy is item.ValueCopy, except that a value badger could not read
// is an error: badger logs a failed value-log read (a checksum mismatch
// included) and yields an empty value instead of failing.
func valueCopy(item *badger.Item) ([]byte, error) {
	v, err := item.ValueCopy(nil)
	if err == nil {
		err = checkRead(item, v)
	}
	return v, err
}

// getValue reads key's value in txn through valueCopy; ok is false when
// the key is absent.
func getValue(txn *badger.Txn, key []byte) (v []byte, ok bool, err error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err == nil {
		v, err = valueCopy(item)
	}
	return v, err == nil, err
}

// itemValue is item.Value with valueCopy's check.
func itemValue(item *badger.Item, fn func(v []byte) error) error {
	return item.Value(func(v []byte) error {
		if err := checkRead(item, v); err != nil {
			return err
		}
		return fn(v)
	})
}

func checkRead(item *badger.Item, v []byte) error {
	if len(v) == 0 && item.ValueSize() > 0 {
		return fmt.Errorf("%w: value of %q unreadable (value log checksum mismatch or damage)", namespace.ErrStorage, item.Key())
	}
	return nil
}
