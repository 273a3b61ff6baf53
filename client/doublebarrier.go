package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// DoubleBarrier lets a group of n processes start and finish a
// computation together, like ZooKeeper's double barrier recipe and
// Curator's DistributedDoubleBarrier: Enter blocks until n participants
// have entered, Leave until every participant has left.
//
// A participant is an ephemeral node path/p-<session>-<random> of its
// session. The barrier is released by the node path/ready, created by a
// Multi that also checks that n participant nodes exist (OpCheck each):
// it is created only while n participants are there at one revision, and
// once it exists every participant passes. So the barrier releases all
// or none: a participant whose session ends before the barrier is full
// takes its place with it, and nobody passes until n are there again.
// A participant that gives up (ctx ends) withdraws with one Multi that
// deletes its node and creates and deletes path/ready: it fails if ready
// exists, and then the participant was released and Enter returns nil,
// so no participant counted in a release ever reports that it was not.
//
// Leave deletes the participant's node and waits until no participant
// node is left; the last to see that deletes ready, so the path can serve
// a next round once every participant of this one has returned from
// Leave (rounds must not overlap).
type DoubleBarrier struct {
	s    *Session
	c    *Client
	path string
	n    int

	mu   sync.Mutex
	node string // this participant's node while entered
}

// Names under a double barrier's path.
const (
	dbParticipant = "p-"
	dbReady       = "ready"
)

// NewDoubleBarrier returns the barrier at path for n participants, for s.
// Every participant of one path must use the same n.
func NewDoubleBarrier(s *Session, path string, n int) *DoubleBarrier {
	return &DoubleBarrier{s: s, c: s.c, path: path, n: n}
}

// Enter joins the barrier and blocks until n participants have joined
// (nil), ctx ends (the participant withdraws, unless the barrier was
// released meanwhile: then nil) or the session ends.
func (b *DoubleBarrier) Enter(ctx context.Context) error {
	if b.n < 1 {
		return fmt.Errorf("%w: double barrier of %d participants", ErrBadOption, b.n)
	}
	b.mu.Lock()
	if b.node != "" {
		b.mu.Unlock()
		return fmt.Errorf("%w: this participant already entered %s", ErrWouldDeadlock, b.path)
	}
	node := join(b.path, dbParticipant+strconv.FormatUint(b.s.id, 16)+"-"+newRequestID())
	b.node = node
	b.mu.Unlock()
	released, err := b.enter(ctx, node)
	if !released {
		b.mu.Lock()
		b.node = ""
		b.mu.Unlock()
	}
	return err
}

// enter runs Enter; released reports that the barrier let node through.
func (b *DoubleBarrier) enter(ctx context.Context, node string) (released bool, err error) {
	if err := createPath(ctx, b.c, b.path); err != nil {
		return false, err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Watch before looking: no change after the look is missed.
	w, err := b.c.Watch(wctx, b.path, Children(), waitingWatch{})
	if err != nil {
		return false, err
	}
	defer w.Close()
	for {
		_, err := b.s.Create(ctx, node, nil, Ephemeral())
		if errors.Is(err, ErrNodeExists) {
			// A lost answer's create was applied (the name is ours alone).
			ok, st, err2 := b.c.Exists(ctx, node)
			if err2 == nil && ok && st.EphemeralOwner == b.s.id {
				err = nil
			}
		}
		if err == nil {
			break
		}
		if !errors.Is(err, ErrUnknownOutcome) || ctx.Err() != nil {
			// The node may exist (ctx ended after sending): take it out.
			return b.withdraw(node, err)
		}
	}
	for {
		ready, again, err := b.tryRelease(ctx, node)
		switch {
		case ready:
			return true, nil
		case again && err == nil:
			continue
		case err == nil:
			select {
			case _, open := <-w.Events():
				if open {
					continue
				}
				err = w.Err()
				if err == nil {
					err = ErrClosed
				}
			case <-b.s.Done():
				return false, b.s.Err()
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		return b.withdraw(node, err)
	}
}

// tryRelease looks at the participants: ready exists (true), or n are
// there and this one creates ready (true), or not yet (false; again when
// the creation's answer was lost and nothing may announce it).
func (b *DoubleBarrier) tryRelease(ctx context.Context, node string) (ready, again bool, err error) {
	names, err := b.c.Children(ctx, b.path)
	if err != nil {
		return false, false, err
	}
	var parts []string
	mine := false
	for _, name := range names {
		switch {
		case name == dbReady:
			return true, false, nil
		case strings.HasPrefix(name, dbParticipant):
			p := join(b.path, name)
			if p == node {
				mine = true
			} else if len(parts) < b.n-1 {
				parts = append(parts, p)
			}
		}
	}
	if !mine {
		return false, false, fmt.Errorf("%w: double barrier %s: participant %s is gone", ErrNotHeld, b.path, node)
	}
	if len(parts) < b.n-1 {
		return false, false, nil
	}
	ops := []Op{OpCheck(node, 0)}
	for _, p := range parts {
		ops = append(ops, OpCheck(p, 0))
	}
	ops = append(ops, OpCreate(join(b.path, dbReady), nil))
	_, err = b.c.Multi(ctx, ops...)
	switch {
	case err == nil, errors.Is(err, ErrNodeExists):
		return true, false, nil
	case errors.Is(err, ErrNoNode), errors.Is(err, ErrBadVersion):
		return false, false, nil // a participant left: wait for another
	case errors.Is(err, ErrUnknownOutcome):
		return false, true, nil
	}
	return false, false, err
}

// withdraw takes node out of the barrier after Enter gave up because of
// why, unless the barrier released it first (then Enter succeeded).
func (b *DoubleBarrier) withdraw(node string, why error) (bool, error) {
	ctx, cancel := b.s.lifeCtx()
	defer cancel()
	ready := join(b.path, dbReady)
	for {
		_, err := b.s.Multi(ctx, OpDelete(node), OpCreate(ready, nil), OpDelete(ready))
		switch {
		case err == nil, errors.Is(err, ErrNoNode):
			// Withdrawn (ErrNoNode: the node was gone, with its session,
			// or the first attempt's lost answer was a success).
			return false, why
		case errors.Is(err, ErrNodeExists):
			return true, nil // released before it could withdraw
		case !errors.Is(err, ErrUnknownOutcome):
			return false, fmt.Errorf("latch: double barrier %s: withdrawing %s: %w (after %w)", b.path, node, err, why)
		}
	}
}

// Leave leaves the barrier and blocks until every participant has left,
// ctx ends or the session ends. It fails with ErrNotHeld when this
// participant has not entered.
func (b *DoubleBarrier) Leave(ctx context.Context) error {
	b.mu.Lock()
	node := b.node
	b.mu.Unlock()
	if node == "" {
		return fmt.Errorf("%w: double barrier %s: not entered", ErrNotHeld, b.path)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := b.c.Watch(wctx, b.path, Children(), waitingWatch{})
	if err != nil {
		return err
	}
	defer w.Close()
	for {
		err := b.s.Delete(ctx, node)
		if err == nil || errors.Is(err, ErrNoNode) {
			break
		}
		if !errors.Is(err, ErrUnknownOutcome) {
			return err
		}
	}
	b.mu.Lock()
	b.node = ""
	b.mu.Unlock()
	for {
		names, err := b.c.Children(ctx, b.path)
		if err != nil {
			return err
		}
		left := true
		for _, name := range names {
			if strings.HasPrefix(name, dbParticipant) {
				left = false
				break
			}
		}
		if left {
			err := b.c.Delete(ctx, join(b.path, dbReady))
			if err == nil || errors.Is(err, ErrNoNode) || errors.Is(err, ErrUnknownOutcome) {
				return nil
			}
			return err
		}
		select {
		case _, open := <-w.Events():
			if !open {
				if err := w.Err(); err != nil {
					return err
				}
				return ErrClosed
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
