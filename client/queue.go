package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Queue is a distributed FIFO queue, like Curator's DistributedQueue:
// producers Put items, consumers Take them, each item is taken by one
// consumer at most once, in the order they were put. An item is a
// persistent sequential node path/item-NNNNNNNNNN holding its data, so
// items outlive the producer and the consumer sessions.
//
// A consumer takes an item with one Multi: delete the item (at its
// version) and create path/taken-item-NNNNNNNNNN, an ephemeral node of
// the consumer's session holding a random id of this take. Two consumers cannot both succeed (the second
// finds the item gone), and the marker makes a take whose answer was lost
// (ErrUnknownOutcome, a leader change) decidable: the marker exists and
// holds this take's id (the item is ours; the session alone would not
// tell two consumers of one session apart), or the item is still there (the take did
// not apply yet: it is sent again, and at most one of the two applies),
// or neither (another consumer took it). The marker is deleted once the
// take is known. A take sent before Take's ctx ended is resolved the same
// way, and Take returns the item if it took it. Only when the consumer's
// session ends before that is the item's fate unknown: Take then fails
// with ErrUnknownOutcome, and the item was taken by nobody else.
//
// Put does not retry a create whose answer was lost: it fails with
// ErrUnknownOutcome, and the item is in the queue once or not at all.
//
// Waiting consumers watch the queue's children: every Put wakes them all
// (a queue's consumers are few), and the first to take an item wins it;
// the others try the next one.
type Queue struct {
	s    *Session
	c    *Client
	path string
}

// Names under a queue's path.
const (
	queueItem  = "item-"
	queueTaken = "taken-"
)

// queueScan is how many items a Take looks at before listing again.
const queueScan = 64

// NewQueue returns the queue at path, for s: s owns the markers of the
// items it takes. Producers need a session only to be given one.
func NewQueue(s *Session, path string) *Queue {
	return &Queue{s: s, c: s.c, path: path}
}

// Put appends an item holding data and returns its node. On
// ErrUnknownOutcome the item may or may not be in the queue (never
// twice).
func (q *Queue) Put(ctx context.Context, data []byte) (string, error) {
	node, err := q.c.Create(ctx, join(q.path, queueItem), data, Sequential())
	if errors.Is(err, ErrNoNode) { // the first Put: make the queue's path
		if err = createPath(ctx, q.c, q.path); err == nil {
			node, err = q.c.Create(ctx, join(q.path, queueItem), data, Sequential())
		}
	}
	if err != nil && ctx.Err() != nil && !errors.Is(err, ErrUnknownOutcome) {
		// Sent before ctx ended, it may have been applied.
		err = fmt.Errorf("%w: queue %s: %w", ErrUnknownOutcome, q.path, err)
	}
	return node, err
}

// Len returns the number of items in the queue.
func (q *Queue) Len(ctx context.Context) (int, error) {
	names, err := q.c.Children(ctx, q.path)
	if errors.Is(err, ErrNoNode) {
		return 0, nil
	}
	n := 0
	for _, name := range names {
		if strings.HasPrefix(name, queueItem) {
			n++
		}
	}
	return n, err
}

// Take removes the oldest item and returns its data, waiting while the
// queue is empty, until ctx ends or the session does.
func (q *Queue) Take(ctx context.Context) ([]byte, error) {
	if err := createPath(ctx, q.c, q.path); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Watch before listing: no Put after the listing is missed.
	w, err := q.c.Watch(ctx, q.path, Children(), waitingWatch{})
	if err != nil {
		return nil, err
	}
	defer w.Close()
	for {
		names, err := q.c.Children(ctx, q.path, Limit(queueScan))
		if err != nil {
			return nil, err
		}
		for _, name := range names { // sorted: items first, oldest first
			if !strings.HasPrefix(name, queueItem) {
				continue
			}
			data, ok, err := q.take(ctx, name)
			if err != nil || ok {
				return data, err
			}
		}
		if len(names) == queueScan && strings.HasPrefix(names[len(names)-1], queueItem) {
			continue // a full page of items that others took: list again
		}
		select {
		case _, open := <-w.Events():
			if !open {
				if err := w.Err(); err != nil {
					return nil, err
				}
				return nil, ErrClosed
			}
		case <-q.s.Done():
			return nil, q.s.Err()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// take tries to take the item name: its data and true, or false when
// another consumer took it first.
func (q *Queue) take(ctx context.Context, name string) ([]byte, bool, error) {
	item, marker := join(q.path, name), join(q.path, queueTaken+name)
	data, st, err := q.c.Get(ctx, item)
	if errors.Is(err, ErrNoNode) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	// The marker names this take, not only its session: two Queues of one
	// session must not both take an item on one marker.
	takeID := []byte(newRequestID())
	for {
		_, err = q.s.Multi(ctx, OpDelete(item, WithVersion(st.Version)), OpCreate(marker, takeID, Ephemeral()))
		switch {
		case err == nil:
			q.unmark(ctx, marker)
			return data, true, nil
		case errors.Is(err, ErrNoNode), errors.Is(err, ErrBadVersion), errors.Is(err, ErrNodeExists):
			return nil, false, nil // taken by another
		case !errors.Is(err, ErrUnknownOutcome) && ctx.Err() == nil:
			return nil, false, err
		}
		// The answer was lost (or ctx ended after the take was sent): find
		// out, for as long as the session lives, so that an item taken is
		// returned and never dropped.
		rctx, cancel := q.s.lifeCtx()
		mine, again, err := q.resolve(rctx, item, marker, takeID)
		cancel()
		if again && ctx.Err() != nil {
			return nil, false, ctx.Err() // not taken, and the caller gave up
		}
		switch {
		case err != nil:
			return nil, false, err
		case mine:
			q.unmark(ctx, marker)
			return data, true, nil
		case !again:
			return nil, false, nil
		}
	}
}

// resolve decides a take of item whose answer was lost: mine (the marker
// is this take's), again (the item is still there: send the take again),
// or neither (another consumer took it).
func (q *Queue) resolve(ctx context.Context, item, marker string, takeID []byte) (mine, again bool, err error) {
	unknown := func(err error) error {
		return fmt.Errorf("%w: queue %s: taking %s: %w", ErrUnknownOutcome, q.path, item, err)
	}
	data, st, err := q.c.Get(ctx, marker)
	switch {
	case errors.Is(err, ErrNoNode):
	case err != nil:
		return false, false, unknown(err)
	case st.EphemeralOwner == q.s.id && string(data) == string(takeID):
		return true, false, nil
	}
	if err := q.s.Err(); err != nil {
		// The session ended: a marker of ours would be gone with it.
		return false, false, unknown(err)
	}
	there, _, err := q.c.Exists(ctx, item)
	if err != nil {
		return false, false, unknown(err)
	}
	return false, there, nil
}

// unmark deletes a take's marker, in the background if it cannot now (it
// vanishes with the session anyway).
func (q *Queue) unmark(ctx context.Context, marker string) {
	for ctx.Err() == nil {
		err := q.s.Delete(ctx, marker)
		if err == nil || errors.Is(err, ErrNoNode) {
			return
		}
		if !errors.Is(err, ErrUnknownOutcome) {
			break
		}
	}
	q.c.goFunc(func() {
		ctx, cancel := q.s.lifeCtx()
		defer cancel()
		for {
			err := q.s.Delete(ctx, marker)
			if !errors.Is(err, ErrUnknownOutcome) || ctx.Err() != nil {
				return
			}
		}
	})
}
