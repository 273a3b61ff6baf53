package client

import (
	"context"
	"sync"
)

// Contention: a holder learns that another session waits for its lock.
// The cluster reports it as a lock event (EventLockContended, Path: the
// held request node) of the command that queued the conflicting request,
// or of the grant when one already waited; Mutex.Contended follows them
// with a watch of the lock's path with Locks, started on the first call
// and ended with the hold (Unlock, Lost, the client's Close). The watch
// starts from the revision before the grant (FromRevision), so an event
// of any revision of the hold is delivered, even one committed before
// Contended was called; a watch that resumes after a failover misses
// nothing either. When the cluster no longer has the history (a Resync)
// the lock's queue is read instead: any request of another session
// waiting on the path counts.

// contention is a hold's Contended state.
type contention struct {
	cmu       sync.Mutex
	contended chan struct{} // nil until the first Contended
	done      chan struct{} // closed when the hold ends (Unlock)
	fired     bool
}

func (hd *hold) stopContention() {
	hd.cmu.Lock()
	defer hd.cmu.Unlock()
	if hd.done == nil {
		hd.done = make(chan struct{})
	}
	select {
	case <-hd.done:
	default:
		close(hd.done)
	}
}

// fire closes contended once.
func (hd *hold) fire() {
	hd.cmu.Lock()
	defer hd.cmu.Unlock()
	if !hd.fired {
		hd.fired = true
		close(hd.contended)
	}
}

func (h *lockHandle) contendedC() <-chan struct{} {
	h.mu.Lock()
	hd := h.last
	h.mu.Unlock()
	if hd == nil {
		return nil
	}
	hd.cmu.Lock()
	defer hd.cmu.Unlock()
	if hd.contended != nil {
		return hd.contended
	}
	hd.contended = make(chan struct{})
	if hd.done == nil {
		hd.done = make(chan struct{})
	}
	done := hd.done
	// A closed client starts nothing: nothing more will be learnt.
	h.c.goFunc(func() { h.followContention(hd, done) })
	return hd.contended
}

// followContention watches the lock's events until hd is contended or
// its hold ends.
func (h *lockHandle) followContention(hd *hold, done chan struct{}) {
	released, stop := withCancelOn(h.c.ctx, done)
	defer stop()
	ctx, cancel := withCancelOn(released, hd.lost) // a loss ends the hold too
	defer cancel()
	from := uint64(0)
	if hd.token > 0 {
		from = hd.token - 1
	}
	w, err := h.c.Watch(ctx, h.path, Locks(), FromRevision(from))
	if err != nil {
		if ctx.Err() == nil {
			h.c.log.Debug("latch: cannot watch a held lock for conflicting requests; Contended will not close",
				"path", h.path, "node", hd.node, "err", err)
		}
		return
	}
	defer w.Close()
	for ev := range w.Events() {
		switch {
		case ev.Type == EventLockContended && ev.Path == hd.node:
			hd.fire()
			return
		case ev.Type == EventResync && h.waitersOn(ctx):
			hd.fire()
			return
		case (ev.Type == EventLockReleased || ev.Type == EventLockLost) && ev.Path == hd.node:
			return // the hold ended
		}
	}
}

// waitersOn reports whether a request of another session waits on the
// lock's path.
func (h *lockHandle) waitersOn(ctx context.Context) bool {
	q, err := h.c.LockQueue(ctx, h.path)
	if err != nil {
		return false
	}
	for _, li := range q {
		if !li.Granted && !li.Phantom && li.Session != h.s.id {
			return true
		}
	}
	return false
}
