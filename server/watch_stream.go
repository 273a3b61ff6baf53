package server

import (
	"context"
	"fmt"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/quicfront"
	"github.com/latch-io/latch/server/watch"
	"github.com/latch-io/latch/session"
)

// Watch frames are cut at this many events or path bytes, far below the
// frame limit whatever the paths.
const (
	watchFrameEvents = 256
	watchFrameBytes  = 256 << 10
)

const allWatchKinds = session.WatchData | session.WatchChildren | session.WatchExists | session.WatchRecursive | session.WatchLocks

// serveWatch runs a MsgWatch stream: an acknowledgement frame (Rev = the
// revision the watch starts after), then frames of events until the client
// cancels, the connection ends, a one-shot fired, or the watch fell behind
// (a final Resync). Any member serves watches from its own applied log.
func (f *front) serveWatch(ctx context.Context, c *quicfront.Conn, str *quic.Stream, req *session.Request) error {
	if err := namespace.ValidatePath(req.Path, f.s.store.Limits()); err != nil {
		return err
	}
	kind := req.Kind
	if kind&^allWatchKinds != 0 {
		return fmt.Errorf("%w: unknown watch kind bits %#x", session.ErrMalformed, uint8(kind))
	}
	if kind == 0 {
		kind = session.WatchData // a node's creation, data changes and deletion
	}
	if err := f.canRead(c, req.Path); err != nil {
		return err
	}
	if err := f.waitMinRev(ctx, req.MinRev); err != nil {
		return err // a client moving between members never goes back in time
	}
	if err := c.AddWatch(f.s.cfg.MaxWatchesPerConn); err != nil {
		return err
	}
	defer c.RemoveWatch()
	if err := f.watchesBy.add(c.Identity(), f.s.cfg.MaxWatchesPerIdentity); err != nil {
		f.capRefusals.watches.Add(1)
		return err
	}
	defer f.watchesBy.remove(c.Identity())

	w := watch.NewWatcher(req.Path, kind, req.FromRev, req.OneShot, c.WatchBytes())
	start := f.hub.Register(w)
	defer f.hub.Unregister(w)
	if err := session.WriteResponse(str, &session.Response{Rev: start}); err != nil {
		return nil // the stream is gone
	}
	var buf []session.WatchEvent
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.Notify():
		}
		events, done := f.hub.Take(w, buf)
		buf = events
		events = f.readableEvents(c.Identity(), events)
		for i := 0; i < len(events) || done; {
			j, size := i, 0
			for j < len(events) && j-i < watchFrameEvents && size < watchFrameBytes {
				size += len(events[j].Path) + 32
				j++
			}
			frame := &session.Response{Events: events[i:j]}
			// A client that does not read its watch is cut, not waited
			// for: the stream ends and its events are given back.
			str.SetWriteDeadline(time.Now().Add(watchWriteTimeout))
			if done && j == len(events) {
				// A watch a byte cap ended says which, next to its Resync.
				frame.Message = f.hub.Reason(w)
				_ = session.Reply(str, frame)
				return nil
			}
			if err := session.WriteResponse(str, frame); err != nil {
				return nil
			}
			f.hub.Sent(w, events[i:j])
			i = j
		}
	}
}

// readableEvents drops the events on nodes the client may not read (a
// recursive watch spans subtrees a rule may deny), checked against the
// rules when they are sent. Resync has no path and always goes. A
// conflicting request's node (Waiter) may lie outside what the client may
// read (an ancestor's or a descendant's lock): then the event goes
// without naming it.
func (f *front) readableEvents(identity string, events []session.WatchEvent) []session.WatchEvent {
	out := events[:0]
	for _, ev := range events {
		if ev.Type == session.EventResync || f.s.store.Authorize(identity, ev.Path, namespace.PermRead) == nil {
			if ev.Waiter != "" && f.s.store.Authorize(identity, ev.Waiter, namespace.PermRead) != nil {
				ev.Waiter, ev.WaiterSession = "", 0
			}
			out = append(out, ev)
		}
	}
	return out
}
