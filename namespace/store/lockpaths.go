package store

import (
	"sort"
)

// LockPaths returns the paths that have a lock queue (a holder, a waiter
// or a lock-delay) in path order, at most limit of them (all when limit
// <= 0); more reports that some were left out. It lets a console list
// every queue without walking the tree.
func (s *Store) LockPaths(limit int) (paths []string, more bool, err error) {
	err = s.readLocks(func(ix *lockIndex) error {
		paths = make([]string, 0, len(ix.paths))
		for p := range ix.paths {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	sort.Strings(paths)
	if limit > 0 && len(paths) > limit {
		return paths[:limit], true, nil
	}
	return paths, false, nil
}
