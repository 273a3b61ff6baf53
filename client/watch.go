package client

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/latch-io/latch/session"
)

// watchBuffer is how many events wait in Events() for the application.
// Beyond it the watcher stops reading its stream, the server's bounded
// buffer fills, and the watch gets a Resync: memory stays bounded on both
// sides.
const watchBuffer = 256

// Watcher delivers the events of one watch. Events arrive in revision
// order, each exactly once, across reconnections and leader changes; when
// the server cannot provide what was missed, an EventResync says so.
type Watcher struct {
	c       *Client
	req     session.Request
	waits   bool // a blocking call waits on it (waitingWatch)
	events  chan Event
	parent  context.Context
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	start   uint64
	closing atomic.Bool

	mu  sync.Mutex
	err error

	// Delivery position, owned by the run goroutine: the revision of the
	// last event delivered (or where the watch started) and how many
	// events of that revision were delivered, so that a resumed stream
	// replaying part of that revision skips exactly those.
	lastRev   uint64
	nAtLast   int
	delivered int // events delivered so far
}

// open opens the watch's stream: a subscription, unless a blocking call
// waits on it.
func (w *Watcher) open(ctx context.Context, conn *session.Conn, req *session.Request) (*session.StreamReader, error) {
	if w.waits {
		return session.OpenStreaming(ctx, conn, req)
	}
	return session.OpenSubscription(ctx, conn, req)
}

// Watch starts watching path and returns once the server has registered
// the watch: every change committed after that point is delivered. What
// is reported is chosen by Data, Children, Exists, Recursive and Locks
// (default: the node's creation, data changes and deletion). The watch lasts until
// Close, until ctx ends, until the client is closed, or (OneShot) until
// its first event; then Events is closed and Err says why.
func (c *Client) Watch(ctx context.Context, path string, opts ...WatchOption) (*Watcher, error) {
	o := buildWatch(opts)
	w := &Watcher{
		c:      c,
		req:    session.Request{Type: session.MsgWatch, Path: path, Kind: o.kind, FromRev: o.fromRev, OneShot: o.oneShot},
		waits:  o.waits,
		events: make(chan Event, watchBuffer),
		parent: ctx,
		done:   make(chan struct{}),
	}
	w.ctx, w.cancel = context.WithCancel(ctx)
	stopOnClose := context.AfterFunc(c.ctx, w.cancel)
	req := w.req
	sr, first, err := c.watchStream(w.ctx, &req, w.open)
	if err != nil {
		stopOnClose()
		w.cancel()
		return nil, err
	}
	w.start = first.Rev
	if o.fromRev > 0 && o.fromRev < w.start {
		w.start = o.fromRev
	}
	w.lastRev = w.start
	started := c.goFunc(func() {
		defer stopOnClose()
		w.run(sr, first)
	})
	if !started {
		sr.Close()
		stopOnClose()
		w.cancel()
		return nil, ErrClosed
	}
	return w, nil
}

// Events returns the channel of events. It is closed when the watch ends.
func (w *Watcher) Events() <-chan Event { return w.events }

// StartRevision is the revision the watch started after: every event
// delivered has a higher revision.
func (w *Watcher) StartRevision() uint64 { return w.start }

// Close ends the watch and waits until Events is closed; events not yet
// received are dropped. It may be called more than once.
func (w *Watcher) Close() {
	w.closing.Store(true)
	w.cancel()
	<-w.done
}

// Done is closed when the watch has ended and Events is closed.
func (w *Watcher) Done() <-chan struct{} { return w.done }

// Err says why the watch ended: nil while it runs, after Close and after a
// OneShot's event; ctx's error when ctx ended; ErrClosed when the client
// was closed; else the server's error (ErrBadPath, ErrTooManyWatches, ...).
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// finish records why the watch ended, preferring the reason the watcher's
// context ended over what that did to the stream.
func (w *Watcher) finish(err error) {
	switch {
	case w.closing.Load():
		err = nil
	case w.c.ctx.Err() != nil:
		err = ErrClosed
	case w.parent.Err() != nil:
		err = w.parent.Err()
	}
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
}

func (w *Watcher) run(sr *session.StreamReader, resp *session.Response) {
	defer close(w.done)
	defer close(w.events)
	defer w.cancel()
	skip, idle := 0, 0
	for {
		before := w.delivered
		err := w.drain(sr, resp, &skip)
		sr.Close()
		switch {
		case err == nil || w.ctx.Err() != nil:
			w.finish(err) // the OneShot fired, or the watch was ended
			return
		case isWire(err) && !retryElsewhere(err):
			w.finish(err) // the server refused the watch itself
			return
		}
		// The stream ended: the connection broke (stream below waits
		// for the next), the server lost leadership or is shutting
		// down, or it ended the watch after a Resync. Resume, pausing
		// longer each time a stream ends without delivering anything,
		// so a server that keeps ending it is not hammered.
		if w.delivered != before {
			idle = 0
		}
		idle++
		if !w.c.sleep(w.ctx, idle) {
			w.finish(w.ctx.Err())
			return
		}
		req := w.req
		req.FromRev, skip = w.resumePoint()
		sr, resp, err = w.c.watchStream(w.ctx, &req, w.open)
		if err != nil {
			w.finish(err)
			return
		}
	}
}

// drain delivers resp's events and then every frame of sr until the
// stream ends, returning why: nil when a OneShot delivered its event,
// else the stream's or ctx's error.
func (w *Watcher) drain(sr *session.StreamReader, resp *session.Response, skip *int) error {
	for {
		more, err := w.deliver(resp.Events, skip)
		if !more {
			return err
		}
		if resp, err = sr.Next(); err != nil {
			return err
		}
	}
}

// deliver hands events to the application in order, dropping those a
// resumed stream replays. It returns false when the watch is over (a
// OneShot delivered, or ctx ended: then with ctx's error).
func (w *Watcher) deliver(events []session.WatchEvent, skip *int) (bool, error) {
	for _, ev := range events {
		e := Event{Type: EventType(ev.Type), Path: ev.Path, Revision: ev.Rev, Session: ev.Session,
			Token: ev.Token, Mode: ev.Mode, Cause: ev.Cause, Waiter: ev.Waiter, WaiterSession: ev.WaiterSession}
		if w.c != nil { // nil in unit tests of delivery alone
			w.c.saw(ev.Rev)
		}
		switch {
		case ev.Type == session.EventResync:
			// Whatever the stream replayed before is void: the watch
			// continues after the revision the server names.
			e.Path = ""
			w.lastRev, w.nAtLast, *skip = ev.Rev, 0, 0
		case ev.Rev < w.lastRev:
			continue
		case ev.Rev == w.lastRev:
			if *skip > 0 {
				*skip--
				continue
			}
			w.nAtLast++
		default:
			w.lastRev, w.nAtLast, *skip = ev.Rev, 1, 0
		}
		select {
		case w.events <- e:
			w.delivered++
		case <-w.ctx.Done():
			return false, w.ctx.Err()
		}
		if w.req.OneShot {
			return false, nil
		}
	}
	return true, nil
}

// resumePoint returns the FromRev to reopen the watch with and how many
// events of revision FromRev+1 the new stream will replay that were
// already delivered. Resuming just before the last revision (rather than
// at it) cannot lose the rest of a revision whose events were cut off
// mid-way by a broken stream.
func (w *Watcher) resumePoint() (uint64, int) {
	if w.nAtLast > 0 && w.lastRev > 1 {
		return w.lastRev - 1, w.nAtLast
	}
	return w.lastRev, 0
}
