package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// lockFollower follows the locks this client holds. The server ends a
// lock's stream at the grant (a held lock is not a request in flight) and
// reports a held lock's end on one MsgLockNotices stream per connection.
// The follower keeps that stream open on the current link, re-attaches
// the held locks granted on an older link to the current one (MsgLock with
// Node), and closes Lost() of a lock that went away. One goroutine per
// session that holds locks (watchSession) loses them when the session
// ends; it lives as long as the session, so that taking a lock starts no
// goroutine.
type lockFollower struct {
	c *Client

	mu    sync.Mutex
	holds map[string]*followed // by request node
	// early: notices for nodes not followed (yet): a notice may overtake
	// the grant it follows on another stream. Bounded, oldest dropped.
	early   map[string]error
	earlyQ  []string
	started bool
	serving *link             // the link the notices stream is open on; nil when none
	watched map[*Session]bool // sessions watchSession watches
	kick    chan struct{}     // capacity 1: some hold is not attached to the current link
}

// maxEarlyNotices bounds the notices kept for nodes not followed.
const maxEarlyNotices = 1024

// followed is one held lock and the link the server follows it for.
type followed struct {
	h    *lockHandle
	hd   *hold
	link *link
}

func newLockFollower(c *Client) *lockFollower {
	return &lockFollower{c: c, holds: map[string]*followed{}, early: map[string]error{}, watched: map[*Session]bool{},
		kick: make(chan struct{}, 1)}
}

// add follows hd, granted on link l. It reports false when the client is
// closed.
func (f *lockFollower) add(h *lockHandle, hd *hold, l *link) bool {
	f.mu.Lock()
	if err, ok := f.early[hd.node]; ok {
		delete(f.early, hd.node)
		f.mu.Unlock()
		hd.lose(fmt.Errorf("%w: %s: %w", ErrLockLost, h.path, err))
		return true
	}
	f.holds[hd.node] = &followed{h: h, hd: hd, link: l}
	start := !f.started
	f.started = true
	watch := !f.watched[h.s]
	f.watched[h.s] = true
	// The notices stream serves l already: nothing to re-attach. (serve
	// pokes itself when it moves to another link.)
	elsewhere := f.serving != l
	f.mu.Unlock()
	if start && !f.c.goFunc(f.run) {
		f.remove(hd.node)
		return false
	}
	if watch && !f.c.goFunc(func() { f.watchSession(h.s) }) {
		f.remove(hd.node)
		return false
	}
	if elsewhere {
		f.poke()
	}
	return true
}

// watchSession loses the locks s holds when s ends (or the client closes,
// which ends its sessions first).
func (f *lockFollower) watchSession(s *Session) {
	select {
	case <-s.Done():
	case <-f.c.ctx.Done():
	}
	err := s.Err()
	if err == nil {
		err = ErrClosed
	}
	f.mu.Lock()
	delete(f.watched, s)
	var gone []*followed
	for node, fo := range f.holds {
		if fo.h.s == s {
			gone = append(gone, fo)
			delete(f.holds, node)
		}
	}
	f.mu.Unlock()
	for _, fo := range gone {
		fo.hd.lose(fmt.Errorf("%w: %s: %w", ErrLockLost, fo.h.path, err))
	}
}

// remove stops following node (Unlock, or the lock is gone).
func (f *lockFollower) remove(node string) {
	f.mu.Lock()
	delete(f.holds, node)
	f.mu.Unlock()
}

func (f *lockFollower) poke() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// lose reports that node went away, as the server said.
func (f *lockFollower) lose(node string, err error) {
	f.mu.Lock()
	fo := f.holds[node]
	delete(f.holds, node)
	if fo == nil {
		if len(f.earlyQ) >= maxEarlyNotices {
			delete(f.early, f.earlyQ[0])
			f.earlyQ = f.earlyQ[1:]
		}
		f.early[node] = err
		f.earlyQ = append(f.earlyQ, node)
	}
	f.mu.Unlock()
	if fo != nil {
		fo.hd.lose(fmt.Errorf("%w: %s: %w", ErrLockLost, fo.h.path, err))
	}
}

// run keeps the notices stream open on the current link until the client
// closes.
func (f *lockFollower) run() {
	c := f.c
	idle := 0
	for c.ctx.Err() == nil {
		l, err := c.waitLink(c.ctx, nil)
		if err != nil {
			return
		}
		if f.serve(l) {
			idle = 0
		} else {
			idle++
		}
		if !c.sleep(c.ctx, idle) {
			return
		}
	}
}

// serve opens the notices stream on l, re-attaches the held locks that
// are followed elsewhere, and reads notices until the stream ends. It
// reports whether the stream was opened.
func (f *lockFollower) serve(l *link) bool {
	ctx, cancel := context.WithCancel(f.c.ctx)
	defer cancel()
	sr, err := session.OpenSubscription(ctx, l.conn, &session.Request{Type: session.MsgLockNotices})
	if err == nil {
		_, err = sr.Next() // the acknowledgement: the stream is served
	}
	if err != nil {
		if sr != nil {
			sr.Close()
		}
		return false
	}
	defer sr.Close()
	frames := make(chan *session.Response)
	ended := make(chan struct{})
	go func() { // ends with the stream, which ends with ctx
		defer close(ended)
		for {
			resp, err := sr.Next()
			if err != nil {
				return
			}
			select {
			case frames <- resp:
			case <-ctx.Done():
				return
			}
		}
	}()
	defer func() { cancel(); sr.Close(); <-ended }()
	f.mu.Lock()
	f.serving = l
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.serving = nil
		f.mu.Unlock()
	}()
	f.poke()
	for {
		select {
		case resp := <-frames:
			if resp.Lock == session.LockGone {
				f.lose(resp.Node, fmt.Errorf("%w: %s %s", ErrNotHeld, resp.Node, resp.Message))
			}
		case <-f.kick:
			if !f.reattachAll(ctx, l) {
				go func() { // retry after a pause, unless the stream ends first
					if f.c.sleep(ctx, 1) {
						f.poke()
					}
				}()
			}
		case <-ended:
			return true
		}
	}
}

// reattachAll moves every held lock followed on another link to l. It
// reports false when some could not be moved yet (to retry).
func (f *lockFollower) reattachAll(ctx context.Context, l *link) bool {
	f.mu.Lock()
	var todo []*followed
	for _, fo := range f.holds {
		if fo.link != l {
			todo = append(todo, fo)
		}
	}
	f.mu.Unlock()
	done := true
	for _, fo := range todo {
		moved, err := f.reattach(ctx, l, fo)
		switch {
		case err != nil:
			f.lose(fo.hd.node, err)
		case !moved:
			done = false
		}
	}
	return done
}

// reattach re-attaches one held lock on l: the server answers Granted and
// follows it for l's connection from then on. err is set when the lock is
// gone; moved false means try again later.
func (f *lockFollower) reattach(ctx context.Context, l *link, fo *followed) (moved bool, err error) {
	h := fo.h
	req := session.Request{Type: session.MsgLock, Path: h.path, Mode: h.mode, Node: fo.hd.node}
	if err := h.s.usable(); err != nil {
		return false, err
	}
	req.Session = h.s.id
	if err := f.c.resume(ctx, l, h.s); err != nil {
		if sessionGone(err) {
			return false, err
		}
		return false, nil
	}
	sr, err := session.OpenStreaming(ctx, l.conn, &req)
	if err != nil {
		return false, nil
	}
	defer sr.Close()
	resp, err := sr.Next()
	switch {
	case err == nil && resp.Lock == session.LockGranted:
		f.mu.Lock()
		if cur := f.holds[fo.hd.node]; cur == fo {
			fo.link = l
		}
		f.mu.Unlock()
		return true, nil
	case err == nil:
		return false, fmt.Errorf("%w: %s is waiting again", ErrNotHeld, fo.hd.node)
	case errors.Is(err, ErrUnknownSession):
		h.s.detach(l.gen) // resume again on the next try
		return false, nil
	case isWire(err) && !retryElsewhere(err) && !errors.Is(err, namespace.ErrClosed):
		return false, err
	}
	return false, nil
}
