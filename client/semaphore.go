package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/latch-io/latch/namespace"
)

// Semaphore lets at most N sessions hold it at once, in FIFO order. It is
// a recipe on the namespace alone: a holder or waiter is an ephemeral
// sequential node path/sem-NNNNNNNNNN owned by its session, and the first N
// nodes in sequence order hold. Every user of one path must use the same N.
// A release wakes every waiter of the path, which re-lists the nodes (the
// server's locks wake only the next waiter; a semaphore's waiters are few).
//
// The semaphore's nodes vanish with their session, so a holder whose
// session ends frees its place; Lost() reports that to the holder, and
// also the loss of its node for any other reason (an admin deleted it:
// nobody else may, the node belongs to the session).
type Semaphore struct {
	s    *Session
	c    *Client
	path string
	n    int

	mu   sync.Mutex
	node string // held or waiting node; "" when none
	// lost is closed when the held place is lost (session ended, node
	// gone); stop ends its guard goroutine on Release.
	lost, stop chan struct{}
}

// semPrefix names a semaphore's nodes under its path.
const semPrefix = "sem-"

// NewSemaphore returns a semaphore of n places on path for s.
func NewSemaphore(s *Session, path string, n int) *Semaphore {
	return &Semaphore{s: s, c: s.c, path: path, n: n}
}

// Acquire blocks until s holds one of the N places, ctx ends (the waiting
// node is removed) or the session ends. A Semaphore holds at most one
// place: Acquire while holding fails with ErrWouldDeadlock.
func (m *Semaphore) Acquire(ctx context.Context) error { return m.acquire(ctx, false) }

// TryAcquire takes a place only if one is free and nobody waits; else it
// fails with ErrLocked and leaves nothing behind.
func (m *Semaphore) TryAcquire(ctx context.Context) error { return m.acquire(ctx, true) }

func (m *Semaphore) acquire(ctx context.Context, try bool) error {
	if m.n < 1 {
		return fmt.Errorf("%w: semaphore of %d places", ErrBadOption, m.n)
	}
	m.mu.Lock()
	if m.node != "" {
		m.mu.Unlock()
		return fmt.Errorf("%w: this semaphore already holds %s", ErrWouldDeadlock, m.path)
	}
	m.node = "-" // reserved while acquiring
	m.mu.Unlock()
	node, err := m.wait(ctx, try)
	m.mu.Lock()
	m.node = node
	if node != "" {
		m.lost, m.stop = make(chan struct{}), make(chan struct{})
		lost, stop := m.lost, m.stop
		if !m.c.goFunc(func() { m.guard(node, lost, stop) }) {
			close(lost) // the client is closed
		}
	}
	m.mu.Unlock()
	return err
}

// guard closes lost when the held node goes or the session ends, until
// stop (Release). The watch is registered before the node is looked at,
// so a deletion in between is not missed.
func (m *Semaphore) guard(node string, lost, stop chan struct{}) {
	ctx, cancel := withCancelOn(m.c.ctx, stop)
	defer cancel()
	gone := func() bool {
		ok, _, err := m.c.Exists(ctx, node)
		return err == nil && !ok
	}
	w, err := m.c.Watch(ctx, node)
	if err != nil {
		select { // cannot watch (closing): the session's end still counts
		case <-m.s.Done():
			close(lost)
		case <-ctx.Done():
		}
		return
	}
	defer w.Close()
	if gone() {
		close(lost)
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.s.Done():
			close(lost)
			return
		case ev, ok := <-w.Events():
			switch {
			case !ok:
				if ctx.Err() == nil && m.s.Err() != nil {
					close(lost)
				}
				return
			case ev.Type == EventDeleted, ev.Type == EventResync && gone():
				close(lost)
				return
			}
		}
	}
}

// wait queues a node and waits for its turn, returning the node held (""
// on failure, with the node removed).
func (m *Semaphore) wait(ctx context.Context, try bool) (string, error) {
	if err := createPath(ctx, m.c, m.path); err != nil {
		return "", err
	}
	// Watch before listing: no departure after the listing is missed.
	w, err := m.c.Watch(ctx, m.path, Children(), waitingWatch{})
	if err != nil {
		return "", err
	}
	defer w.Close()
	node, err := m.s.Create(ctx, join(m.path, semPrefix), nil, Ephemeral(), Sequential())
	if errors.Is(err, ErrUnknownOutcome) {
		node, err = m.findOwn(ctx)
	}
	if err != nil {
		return "", err
	}
	claim(m, node)
	for {
		ahead, err := m.ahead(ctx, node)
		if err == nil && ahead < m.n {
			return node, nil
		}
		if err == nil && try {
			err = fmt.Errorf("%w: semaphore %s has no free place", ErrLocked, m.path)
		}
		if err == nil {
			select {
			case _, ok := <-w.Events():
				if ok {
					continue
				}
				err = w.Err()
				if err == nil {
					err = ErrClosed
				}
			case <-m.s.Done():
				err = m.s.Err()
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		m.remove(ctx, node)
		return "", fmt.Errorf("latch: semaphore %s: %w", m.path, err)
	}
}

// ahead returns how many of the path's nodes come before node, or
// ErrNotHeld when node is gone.
func (m *Semaphore) ahead(ctx context.Context, node string) (int, error) {
	names, err := m.c.Children(ctx, m.path)
	if err != nil {
		return 0, err
	}
	mine := node[strings.LastIndexByte(node, '/')+1:]
	n := 0
	found := false
	for _, name := range names { // sorted; the suffix is fixed width
		if !strings.HasPrefix(name, semPrefix) {
			continue
		}
		if name == mine {
			found = true
			break
		}
		n++
	}
	if !found {
		return 0, fmt.Errorf("%w: %s is gone", ErrNotHeld, node)
	}
	return n, nil
}

// findOwn finds the node a create whose answer was lost made: the newest
// of the path's nodes that this session owns and no other Semaphore
// value holds.
func (m *Semaphore) findOwn(ctx context.Context) (string, error) {
	names, err := m.c.Children(ctx, m.path)
	if err != nil {
		return "", err
	}
	slices.Reverse(names)
	for _, name := range names {
		if !strings.HasPrefix(name, semPrefix) {
			continue
		}
		p := join(m.path, name)
		st, err := m.c.Stat(ctx, p)
		if errors.Is(err, ErrNoNode) {
			continue
		}
		if err != nil {
			return "", err
		}
		if st.EphemeralOwner == m.s.id && claimIfFree(m, p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: the create of a semaphore node was not applied", ErrUnknownOutcome)
}

// remove deletes node now while ctx lives (TryAcquire leaves nothing
// behind when it returns), else in the background for as long as the
// session lives (a node left behind holds a place for the session's life,
// so a slow leader change must not end the attempt).
func (m *Semaphore) remove(ctx context.Context, node string) {
	if ctx.Err() == nil {
		if err := m.s.Delete(ctx, node); err == nil || errors.Is(err, ErrNoNode) {
			unclaim(m, node)
			return
		}
	}
	m.c.goFunc(func() {
		ctx, cancel := m.s.lifeCtx()
		defer cancel()
		_ = m.s.Delete(ctx, node)
		unclaim(m, node)
	})
}

// Release gives the place back. It fails with ErrNotHeld when the
// Semaphore holds none (or its node is gone: the session ended).
func (m *Semaphore) Release(ctx context.Context) error {
	m.mu.Lock()
	node := m.node
	if node == "" || node == "-" {
		m.mu.Unlock()
		return fmt.Errorf("%w: semaphore %s is not held", ErrNotHeld, m.path)
	}
	m.mu.Unlock()
	m.mu.Lock()
	if m.stop != nil {
		close(m.stop) // a release is not a loss
		m.stop = nil
	}
	m.mu.Unlock()
	err := m.s.Delete(ctx, node)
	if errors.Is(err, ErrUnknownOutcome) {
		err = m.s.Delete(ctx, node) // deleting twice finds it gone
	}
	if errors.Is(err, ErrNoNode) {
		err = fmt.Errorf("%w: %s was gone", ErrNotHeld, node)
	}
	if err == nil || errors.Is(err, ErrNotHeld) {
		m.mu.Lock()
		m.node, m.lost = "", nil
		m.mu.Unlock()
		unclaim(m, node)
	}
	return err
}

// Node is the node that holds the place ("" when none).
func (m *Semaphore) Node() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.node == "-" {
		return ""
	}
	return m.node
}

// Lost is closed when the place held is lost: the session ended, or the
// node went for any other reason. Without a place held it is the
// session's Done.
func (m *Semaphore) Lost() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lost == nil {
		return m.s.Done()
	}
	return m.lost
}

// createPath creates path and its missing ancestors as persistent nodes.
func createPath(ctx context.Context, c *Client, path string) error {
	if path == "/" {
		return nil
	}
	ok, _, err := c.Exists(ctx, path)
	if err != nil || ok {
		return err
	}
	if err := createPath(ctx, c, namespace.Parent(path)); err != nil {
		return err
	}
	_, err = c.Create(ctx, path, nil)
	if errors.Is(err, ErrNodeExists) || errors.Is(err, ErrUnknownOutcome) {
		// Someone else made it, or our create may have: look again.
		if ok, _, err2 := c.Exists(ctx, path); err2 == nil && ok {
			return nil
		}
	}
	return err
}

// Claims: the slot nodes each session's semaphores own, so that a
// semaphore looking for its lost slot node never takes another's. (Lock
// requests need none: they carry request ids the server deduplicates.)
var claims = struct {
	sync.Mutex
	m map[*Session]map[string]*Semaphore
}{m: map[*Session]map[string]*Semaphore{}}

// claim records that m owns node, unless another semaphore does.
func claim(m *Semaphore, node string) { claimIfFree(m, node) }

// claimIfFree claims node for m and reports whether m owns it now.
func claimIfFree(m *Semaphore, node string) bool {
	claims.Lock()
	defer claims.Unlock()
	set := claims.m[m.s]
	if set[node] != nil {
		return set[node] == m
	}
	if set == nil {
		set = map[string]*Semaphore{}
		claims.m[m.s] = set
	}
	set[node] = m
	return true
}

func unclaim(m *Semaphore, node string) {
	if node == "" {
		return
	}
	claims.Lock()
	defer claims.Unlock()
	set := claims.m[m.s]
	if set[node] == m {
		delete(set, node)
		if len(set) == 0 {
			delete(claims.m, m.s)
		}
	}
}
