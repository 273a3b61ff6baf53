package client

import (
	"context"
	"fmt"
)

// RWMutex is a readers-writer lock on a path: any number of sessions may
// hold it shared (RLock) together, an exclusive holder (Lock) alone.
// Grants are FIFO: a waiting writer holds back readers that come after
// it, so writers never starve. Locks on a path cover its subtree:
// RLock("/billing") waits for a writer of "/billing/job-a" and holds off
// new ones.
//
// One RWMutex holds at most one lock at a time, shared or exclusive (a
// session cannot hold both: they conflict, ErrWouldDeadlock). Use one
// RWMutex per goroutine.
type RWMutex struct {
	r, w *lockHandle
}

// NewRWMutex returns a readers-writer lock on path for s.
func NewRWMutex(s *Session, path string, opts ...LockOption) *RWMutex {
	o := buildLock(opts)
	return &RWMutex{r: newLockHandle(s, path, LockShared, o), w: newLockHandle(s, path, LockExclusive, o)}
}

// RLock blocks until the lock is held shared; see Mutex.Lock.
func (m *RWMutex) RLock(ctx context.Context) error {
	if m.w.token() != 0 {
		return m.busy()
	}
	return m.r.acquire(ctx, false)
}

// TryRLock takes the lock shared only if that is granted at once; else
// ErrLocked.
func (m *RWMutex) TryRLock(ctx context.Context) error {
	if m.w.token() != 0 {
		return m.busy()
	}
	return m.r.acquire(ctx, true)
}

// RUnlock releases a shared hold; see Mutex.Unlock.
func (m *RWMutex) RUnlock(ctx context.Context) error { return m.r.release(ctx) }

// Lock blocks until the lock is held exclusively; see Mutex.Lock.
func (m *RWMutex) Lock(ctx context.Context) error {
	if m.r.token() != 0 {
		return m.busy()
	}
	return m.w.acquire(ctx, false)
}

// TryLock takes the lock exclusively only if that is granted at once;
// else ErrLocked.
func (m *RWMutex) TryLock(ctx context.Context) error {
	if m.r.token() != 0 {
		return m.busy()
	}
	return m.w.acquire(ctx, true)
}

// Unlock releases an exclusive hold; see Mutex.Unlock.
func (m *RWMutex) Unlock(ctx context.Context) error { return m.w.release(ctx) }

// Renew restarts the hold TTL of whichever hold is current.
func (m *RWMutex) Renew(ctx context.Context) error { return m.current().renew(ctx) }

// Token is the current hold's fencing token (0 when none). Readers
// granted together share a token.
func (m *RWMutex) Token() uint64 { return m.current().token() }

// Sequencer names the current hold, shared or exclusive.
func (m *RWMutex) Sequencer() Sequencer { return m.current().sequencer() }

// Lost is closed when the latest hold is lost; see Mutex.Lost.
func (m *RWMutex) Lost() <-chan struct{} { return m.latest().lostC() }

// Err says why Lost closed.
func (m *RWMutex) Err() error { return m.latest().lostErr() }

// Contended is closed when another session waits for a lock that
// conflicts with the latest hold (a writer behind readers, anyone behind
// a writer); see Mutex.Contended.
func (m *RWMutex) Contended() <-chan struct{} { return m.latest().contendedC() }

// Node is the current hold's request node ("" when none).
func (m *RWMutex) Node() string { return m.current().nodeName() }

// Revision is the current hold's request revision (0 when none).
func (m *RWMutex) Revision() uint64 { return m.current().revision() }

// Path is the locked path.
func (m *RWMutex) Path() string { return m.r.path }

// busy refuses a second hold: the session's shared and exclusive locks
// on one path conflict, so the server would refuse it anyway.
func (m *RWMutex) busy() error {
	return fmt.Errorf("%w: %s is already held by this RWMutex", ErrWouldDeadlock, m.r.path)
}

// current is the handle holding now (the exclusive one when none does).
func (m *RWMutex) current() *lockHandle {
	if m.r.token() != 0 {
		return m.r
	}
	return m.w
}

// latest is the handle whose hold began last.
func (m *RWMutex) latest() *lockHandle {
	m.r.mu.Lock()
	r := m.r.last
	m.r.mu.Unlock()
	m.w.mu.Lock()
	w := m.w.last
	m.w.mu.Unlock()
	if r != nil && (w == nil || r.token > w.token) {
		return m.r
	}
	return m.w
}
