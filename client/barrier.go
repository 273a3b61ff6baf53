package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/latch-io/latch/namespace"
)

// Barrier holds a group of processes until one of them lets them go, like
// etcd's barrier: Hold raises it, Release lowers it, Wait blocks while it
// is up. The barrier is the node at its path, ephemeral and owned by the
// holder's session, so a holder that dies lowers it instead of blocking
// everyone forever. Its parent path is created when missing.
type Barrier struct {
	c    *Client
	s    *Session // the holder's session; nil for a Barrier that only waits
	path string
}

// NewBarrier returns the barrier at path. s is the session that holds it
// (Hold, Release); nil when this process only waits.
func NewBarrier(c *Client, s *Session, path string) *Barrier {
	return &Barrier{c: c, s: s, path: path}
}

// Hold raises the barrier. It fails with ErrNodeExists when it is up
// already.
func (b *Barrier) Hold(ctx context.Context) error {
	if b.s == nil {
		return fmt.Errorf("%w: barrier %s: holding needs a session", ErrBadOption, b.path)
	}
	if err := createPath(ctx, b.c, namespace.Parent(b.path)); err != nil {
		return err
	}
	_, err := b.s.Create(ctx, b.path, nil, Ephemeral())
	if errors.Is(err, ErrUnknownOutcome) {
		// Find out whether our create made it.
		ok, st, err2 := b.c.Exists(ctx, b.path)
		if err2 == nil && ok && st.EphemeralOwner == b.s.id {
			return nil
		}
	}
	return err
}

// Release lowers the barrier: every Wait returns. Releasing a barrier
// that is down does nothing.
func (b *Barrier) Release(ctx context.Context) error {
	del := func() error { return b.c.Delete(ctx, b.path) }
	if b.s != nil {
		// The barrier node is the holder's ephemeral: only its session
		// (or an admin) may delete it.
		del = func() error { return b.s.Delete(ctx, b.path) }
	}
	err := del()
	if errors.Is(err, ErrUnknownOutcome) {
		err = del()
	}
	if errors.Is(err, ErrNoNode) {
		return nil
	}
	return err
}

// Wait blocks until the barrier is down (now, if it is not up) or ctx
// ends.
func (b *Barrier) Wait(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Watch before reading: a release after the read is not missed.
	w, err := b.c.Watch(ctx, b.path, Exists(), waitingWatch{})
	if err != nil {
		return err
	}
	defer w.Close()
	for {
		ok, _, err := b.c.Exists(ctx, b.path)
		if err != nil || !ok {
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
