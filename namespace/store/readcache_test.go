package store

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/latch-io/latch/namespace"
)

// checkReadCache fails unless every record in the store's read cache is
// what badger holds: a stale entry would make Apply decide on a state that
// is not the store's, and members would diverge.
func checkReadCache(t testing.TB, s *Store) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.db.View(func(txn *badger.Txn) error {
		check := func(what string, key, want []byte, wantOK bool) error {
			got, ok, err := getValue(txn, key)
			if err != nil {
				return err
			}
			if ok != wantOK || !bytes.Equal(got, want) {
				return fmt.Errorf("read cache has %s = %x (present %t); badger has %x (present %t)", what, want, wantOK, got, ok)
			}
			return nil
		}
		for p, c := range s.cache.nodes {
			var want []byte
			if c.ok {
				want = appendNode(nil, &c.n)
			}
			if err := check("node "+p, nodeKey(p), want, c.ok); err != nil {
				return err
			}
		}
		for k, c := range s.cache.raw {
			if err := check(fmt.Sprintf("%q", k), []byte(k), c.v, c.ok); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.cache.bytes > readCacheBytes {
		t.Fatalf("read cache holds %d bytes, bound %d", s.cache.bytes, readCacheBytes)
	}
}

// TestReadCacheFollowsBadger applies random logs (nodes, sessions, multis
// that fail halfway, locks, session ends that checkpoint) in random
// batches, some with a tiny transaction budget, and checks the cache
// against badger after every batch.
func TestReadCacheFollowsBadger(t *testing.T) {
	w := newLockWorkload(t, 7, modelLimits(2))
	for range 1500 {
		w.step()
	}
	logs := map[string][]namespace.BatchEntry{"tree": randomLog(3, 1500), "locks": w.log}
	for name, log := range logs {
		for _, split := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/split=%t", name, split), func(t *testing.T) {
				s, err := Open(Config{Dir: t.TempDir(), Limits: modelLimits(2)})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				if split {
					s.maxTxnCount, s.maxTxnBytes = 7, 600
				}
				hits := 0
				for i := 0; i < len(log); {
					n := min(len(log)-i, 1+i%64)
					before := len(s.cache.nodes) + len(s.cache.raw)
					s.ApplyBatch(log[i : i+n])
					i += n
					checkReadCache(t, s)
					hits += before
				}
				if hits == 0 {
					t.Fatal("the cache never held anything: the test checks nothing")
				}
			})
		}
	}
}

// TestReadCacheDroppedWithState: a failed commit and a Restore replace
// what badger holds, so they must empty the cache.
func TestReadCacheDroppedWithState(t *testing.T) {
	t.Run("failed commit", func(t *testing.T) {
		s := openTestStore(t)
		id, idx := bigSession(t, s, 300, 3)
		s.maxTxnCount = 40
		s.afterCheckpoint = func() error { return errors.New("simulated crash") }
		if r := s.Apply(idx, 3, &namespace.Command{Op: namespace.OpSessionExpire, Sessions: []uint64{id}}); !errors.Is(r.Err, namespace.ErrStorage) {
			t.Fatalf("Apply = %v, want the simulated crash", r.Err)
		}
		if n := len(s.cache.nodes) + len(s.cache.raw); n != 0 || s.cache.bytes != 0 {
			t.Fatalf("read cache holds %d entries (%d bytes) after a failed commit", n, s.cache.bytes)
		}
	})
	t.Run("restore", func(t *testing.T) {
		src, dst := openTestStore(t), openTestStore(t)
		src.Apply(1, 1, &namespace.Command{Op: namespace.OpCreate, Path: "/only-in-src"})
		dst.Apply(1, 1, &namespace.Command{Op: namespace.OpCreate, Path: "/only-in-dst"})
		if _, ok := dst.cache.nodes["/only-in-dst"]; !ok {
			t.Fatal("the create did not reach the cache: the test checks nothing")
		}
		if err := dst.Restore(bytes.NewReader(snapshotBytes(t, src))); err != nil {
			t.Fatal(err)
		}
		checkReadCache(t, dst)
		if r := dst.Apply(2, 2, &namespace.Command{Op: namespace.OpCreate, Path: "/only-in-dst"}); r.Err != nil {
			t.Fatalf("create after restore: %v (a stale cache says it exists)", r.Err)
		}
	})
}

// TestReadCacheBounded: node data kept in the value log is never cached
// (its checksum is checked on every read), and the cache never holds more
// than readCacheBytes.
func TestReadCacheBounded(t *testing.T) {
	s := openTestStore(t)
	big := bytes.Repeat([]byte("v"), valueThreshold)
	if r := s.Apply(1, 1, &namespace.Command{Op: namespace.OpCreate, Path: "/big", Data: big}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if _, ok := s.cache.nodes["/big"]; ok {
		t.Fatal("a value-log node is cached")
	}
	data := bytes.Repeat([]byte("d"), 3000)
	idx := uint64(2)
	var batch []namespace.BatchEntry
	for i := range 4000 { // about 12 MB of nodes
		batch = append(batch, namespace.BatchEntry{Index: idx, Time: 1, Cmd: &namespace.Command{Op: namespace.OpCreate, Path: fmt.Sprintf("/n%d", i), Data: data}})
		idx++
		if len(batch) == 64 {
			for _, r := range s.ApplyBatch(batch) {
				if r.Err != nil {
					t.Fatal(r.Err)
				}
			}
			batch = batch[:0]
			if s.cache.bytes > readCacheBytes {
				t.Fatalf("read cache holds %d bytes, bound %d", s.cache.bytes, readCacheBytes)
			}
		}
	}
	checkReadCache(t, s)
}
