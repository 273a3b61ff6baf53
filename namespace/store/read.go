package store

import (
	"bytes"
	"errors"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/latch-io/latch/namespace"
)

// view runs fn in a read transaction; it sees the state as of the last
// committed batch.
func (s *Store) view(fn func(txn *badger.Txn) error) error {
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.closed.Load() {
		return namespace.ErrClosed
	}
	err := s.db.View(fn)
	if err != nil && !isNamespaceError(err) {
		err = fmt.Errorf("%w: %w", namespace.ErrStorage, err)
	}
	if errors.Is(err, namespace.ErrStorage) {
		return s.fault(err)
	}
	return err
}

// isNamespaceError tells our own errors, returned through badger, from
// badger's.
func isNamespaceError(err error) bool {
	for _, e := range []error{namespace.ErrNoNode, namespace.ErrNoSession, namespace.ErrBadPath, namespace.ErrStorage, namespace.ErrClosed, namespace.ErrNoLock} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// scan calls fn for every key under prefix in key order. The slices are
// only valid during fn.
func scan(txn *badger.Txn, prefix []byte, fn func(k, v []byte) error) error {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 100})
	defer it.Close()
	for it.Seek(prefix); it.Valid(); it.Next() {
		item := it.Item()
		err := itemValue(item, func(v []byte) error { return fn(item.Key(), v) })
		if err != nil {
			return err
		}
	}
	return nil
}

// readNode reads the node at a valid path; it wraps ErrNoNode when absent.
func readNode(txn *badger.Txn, p string) (*node, error) {
	item, err := txn.Get(nodeKey(p))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: %s", namespace.ErrNoNode, p)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %w", namespace.ErrStorage, p, err)
	}
	v, err := valueCopy(item)
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %w", namespace.ErrStorage, p, err)
	}
	return decodeNode(v)
}

func (s *Store) readNode(p string) (*node, error) {
	if err := namespace.ValidatePath(p, s.Limits()); err != nil {
		return nil, err
	}
	var n *node
	err := s.view(func(txn *badger.Txn) (err error) {
		n, err = readNode(txn, p)
		return err
	})
	return n, err
}

// Get returns a node's data and stat.
func (s *Store) Get(path string) ([]byte, namespace.Stat, error) {
	n, err := s.readNode(path)
	if err != nil {
		return nil, namespace.Stat{}, err
	}
	return n.data, n.stat, nil
}

// Stat returns a node's stat.
func (s *Store) Stat(path string) (namespace.Stat, error) {
	n, err := s.readNode(path)
	if err != nil {
		return namespace.Stat{}, err
	}
	return n.stat, nil
}

// Exists reports whether a node exists, with its stat when it does.
func (s *Store) Exists(path string) (bool, namespace.Stat, error) {
	n, err := s.readNode(path)
	if errors.Is(err, namespace.ErrNoNode) {
		return false, namespace.Stat{}, nil
	}
	if err != nil {
		return false, namespace.Stat{}, err
	}
	return true, n.stat, nil
}

// Children returns the sorted names of path's children that sort after
// after ("" for the first page), at most limit of them (limit <= 0 or above
// Limits.MaxChildrenPage means MaxChildrenPage); more reports whether
// further names follow.
func (s *Store) Children(path, after string, limit int) (names []string, more bool, err error) {
	if err := namespace.ValidatePath(path, s.Limits()); err != nil {
		return nil, false, err
	}
	if limit <= 0 || limit > s.Limits().MaxChildrenPage {
		limit = s.Limits().MaxChildrenPage
	}
	err = s.view(func(txn *badger.Txn) error {
		if _, err := txn.Get(nodeKey(path)); errors.Is(err, badger.ErrKeyNotFound) {
			return fmt.Errorf("%w: %s", namespace.ErrNoNode, path)
		} else if err != nil {
			return err
		}
		prefix := childPrefix(path)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		start := append(bytes.Clone(prefix), after...)
		for it.Seek(start); it.Valid(); it.Next() {
			name := it.Item().Key()[len(prefix):]
			if string(name) == after && after != "" {
				continue
			}
			if len(names) == limit {
				more = true
				break
			}
			names = append(names, string(name))
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return names, more, nil
}
