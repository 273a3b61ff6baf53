package raftstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/raft"
)

// hasBadger reports whether dir holds a badger database.
func hasBadger(dir string) (bool, error) {
	_, err := os.Stat(filepath.Join(dir, "MANIFEST"))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// Keys hashicorp/raft keeps in its stable store, and which of them it
// stores with SetUint64: the badger Store wrote those big-endian, the WAL
// little-endian, so they are copied as numbers, the rest as bytes.
var raftUint64Keys = map[string]bool{"CurrentTerm": true, "LastVoteTerm": true}

// migrate copies a badger Store in cfg.MigrateFrom into a fresh WAL in
// cfg.Dir and then removes the badger store. Removing it is the commit
// point: a crash before that leaves the badger store in place, and the next
// Open starts the copy over from an empty WAL.
func migrate(cfg WALConfig) error {
	ok, err := hasBadger(cfg.MigrateFrom)
	if err != nil || !ok {
		return err
	}
	if err := os.RemoveAll(cfg.Dir); err != nil {
		return fmt.Errorf("latch: migrate raft log: clear %s: %w", cfg.Dir, err)
	}
	old, err := Open(Config{Dir: cfg.MigrateFrom})
	if err != nil {
		return err
	}
	w, err := openWAL(cfg)
	if err != nil {
		old.Close()
		return err
	}
	err = copyStore(old, w)
	err = errors.Join(err, w.Close(), old.Close())
	if err != nil {
		return fmt.Errorf("latch: migrate raft log from %s: %w", cfg.MigrateFrom, err)
	}
	if err := os.RemoveAll(cfg.MigrateFrom); err != nil {
		return fmt.Errorf("latch: migrate raft log: remove %s: %w", cfg.MigrateFrom, err)
	}
	return nil
}

func copyStore(old *Store, w *WAL) error {
	stable, err := old.stableEntries()
	if err != nil {
		return err
	}
	for k, v := range stable {
		if raftUint64Keys[k] {
			n, err := old.GetUint64([]byte(k))
			if err != nil {
				return err
			}
			err = w.SetUint64([]byte(k), n)
		} else {
			err = w.Set([]byte(k), v)
		}
		if err != nil {
			return fmt.Errorf("stable key %q: %w", k, err)
		}
	}
	first, _ := old.FirstIndex()
	last, _ := old.LastIndex()
	if first == 0 {
		return nil
	}
	const batch = 256
	for lo := first; lo <= last; lo += batch {
		logs := make([]*raft.Log, 0, batch)
		for i := lo; i <= last && i < lo+batch; i++ {
			l := new(raft.Log)
			if err := old.GetLog(i, l); err != nil {
				return err
			}
			logs = append(logs, l)
		}
		if err := w.StoreLogs(logs); err != nil {
			return fmt.Errorf("log %d-%d: %w", lo, lo+uint64(len(logs))-1, err)
		}
	}
	return nil
}

// stableEntries returns every stable key and value, for migration.
func (s *Store) stableEntries() (map[string][]byte, error) {
	out := map[string][]byte{}
	err := s.db.View(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = []byte{prefixStable}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			out[string(it.Item().Key()[1:])] = v
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("latch: list raft stable keys: %w", err)
	}
	return out, nil
}
