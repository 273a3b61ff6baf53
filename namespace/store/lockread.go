package store

import (
	"fmt"
	"io"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/latch-io/latch/namespace"
)

// Lock reads see the state as of the last applied command.

// readLocks runs fn on the lock index, holding off Restore and Close.
func (s *Store) readLocks(fn func(ix *lockIndex) error) error {
	s.gate.RLock()
	defer s.gate.RUnlock()
	if s.closed.Load() {
		return namespace.ErrClosed
	}
	ix := s.locks
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return fn(ix)
}

// Lock describes the live lock request whose node is node; phantoms have
// no node and are only listed by LockQueue.
func (s *Store) Lock(node string) (namespace.LockInfo, error) {
	if err := namespace.ValidatePath(node, s.Limits()); err != nil {
		return namespace.LockInfo{}, err
	}
	var info namespace.LockInfo
	err := s.readLocks(func(ix *lockIndex) error {
		q := ix.byNode[node]
		if q == nil {
			return fmt.Errorf("%w: %s", namespace.ErrNoLock, node)
		}
		info = q.info()
		return nil
	})
	return info, err
}

// LockQueue lists the requests on path, phantoms included, in queue
// (revision) order; the granted ones come first. It is empty when nobody
// locks path.
func (s *Store) LockQueue(path string) ([]namespace.LockInfo, error) {
	if err := namespace.ValidatePath(path, s.Limits()); err != nil {
		return nil, err
	}
	var out []namespace.LockInfo
	err := s.readLocks(func(ix *lockIndex) error {
		if lp := ix.paths[path]; lp != nil {
			for e := lp.queue.Front(); e != nil; e = e.Next() {
				out = append(out, reqOf(e).info())
			}
		}
		return nil
	})
	return out, err
}

// CheckSequencer reports whether session still holds a mode lock on path
// granted with token: what a resource server asks before it acts on a
// request carrying that sequencer. A phantom no longer holds, nor does a
// request of a session that has ended.
func (s *Store) CheckSequencer(path string, mode namespace.LockMode, token uint64, session uint64) (bool, error) {
	if err := namespace.ValidatePath(path, s.Limits()); err != nil {
		return false, err
	}
	if mode != namespace.LockExclusive && mode != namespace.LockShared {
		return false, fmt.Errorf("%w: lock mode %d", namespace.ErrBadCommand, mode)
	}
	held := false
	err := s.readLocks(func(ix *lockIndex) error {
		if _, ending := ix.ending[session]; ending {
			return nil // the session has ended; its nodes go in chunks
		}
		for _, q := range ix.bySession[session] {
			if q.granted && q.token == token && q.mode == mode && q.lockPath() == path {
				held = true
				break
			}
		}
		return nil
	})
	return held, err
}

// NextInLine names the request on path that is next in line: the first
// one not runnable yet (the path's frontier, see lockIndex), which the
// next release or withdrawal ahead of it may grant. ok is false when
// every request on path runs (or none waits). The lock service tells that
// request's waiter, so that only waiters about to be granted watch the
// leader closely. The path is not validated: callers pass the parent of
// a request node they got from the index.
func (s *Store) NextInLine(path string) (node string, ok bool) {
	s.readLocks(func(ix *lockIndex) error {
		if lp := ix.paths[path]; lp != nil && lp.frontier != nil {
			node, ok = lp.frontier.node, true
		}
		return nil
	})
	return node, ok
}

// NextTimer is when the leader should propose the next tick (an OpNoop
// stamped with its clock): the earliest hold deadline or lock-delay end, or
// the last applied command's time when grants are left over from a full
// batch or a session's nodes are left to delete (session.go). ok is false when nothing is due, ever.
func (s *Store) NextTimer() (unixNanos int64, ok bool) {
	s.readLocks(func(ix *lockIndex) error {
		if ix.pending.len() > 0 || len(ix.ending) > 0 {
			unixNanos, ok = ix.clock.Load(), true
			return nil
		}
		if k, _, found := ix.timers.min(); found {
			unixNanos, ok = keyTime(k), true
		}
		return nil
	})
	return unixNanos, ok
}

// dumpLocks writes the lock records of txn in revision order; "runnable"
// marks the pending requests. The caller holds gate.
func (s *Store) dumpLocks(w io.Writer, txn *badger.Txn) error {
	ix := s.locks
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return scan(txn, []byte{spaceLock}, func(k, v []byte) error {
		q, err := decodeLockRecord(beUint64(k[1:]), v)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "lock %d %s %s session=%d ttl=%dms delay=%dms", q.rev, q.node, q.mode, q.session, q.holdTTL, q.delay)
		switch {
		case q.phantom:
			fmt.Fprintf(w, " phantom token=%d until=%d\n", q.token, q.delayEnd)
		case q.granted:
			fmt.Fprintf(w, " held token=%d at=%d deadline=%d\n", q.token, q.grantTime, q.deadline)
		case ix.byNode[q.node] != nil && ix.byNode[q.node].pending:
			fmt.Fprintf(w, " runnable\n")
		default:
			fmt.Fprintf(w, " waiting\n")
		}
		return nil
	})
}

// LockCounts are the lock requests right now, for metrics.
type LockCounts struct {
	Held    int // granted requests of live sessions
	Waiting int // requests not granted yet
	Delayed int // phantoms: holders lost while lock-delay runs
}

// CountLocks counts the lock requests; it visits each once.
func (s *Store) CountLocks() (LockCounts, error) {
	var c LockCounts
	err := s.readLocks(func(ix *lockIndex) error {
		for _, lp := range ix.paths {
			for e := lp.queue.Front(); e != nil; e = e.Next() {
				switch q := e.Value.(*lockReq); {
				case q.phantom:
					c.Delayed++
				case q.granted:
					c.Held++
				default:
					c.Waiting++
				}
			}
		}
		return nil
	})
	return c, err
}

// LockByRequestID returns the node of session's live lock request named
// id by its client, ok false when there is none.
func (s *Store) LockByRequestID(session uint64, id string) (node string, ok bool, err error) {
	err = s.readLocks(func(ix *lockIndex) error {
		if q := ix.byReqID[reqIDKey{session, id}]; q != nil {
			node, ok = q.node, true
		}
		return nil
	})
	return node, ok, err
}
