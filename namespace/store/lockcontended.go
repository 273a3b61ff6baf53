package store

import (
	"container/list"

	"github.com/latch-io/latch/namespace"
)

// Conflicting requests, as Chubby reports them: a holder learns that
// someone waits for what it holds, so it can finish and release early.
// When a command queues a request that it does not also grant or make
// runnable (it waits behind a conflicting request), it emits
// EventLockContended for each held request that conflicts with it: Path
// and Session name the holder, Waiter and WaiterSession the new request.
// The event has the revision of the command that queued the waiter, so a
// holder watching its lock learns of it from the same applied entry.
//
// The holders are found by walking the queues from their fronts: the
// lock path's subtree (sub, or subX for a shared waiter) and each
// ancestor's queue (xqueue for a shared waiter). Held requests are at the
// front of those lists; a walk stops at the first request newer than the
// waiter and after maxContendedScan requests, so a request costs
// O(depth × maxContendedScan) at most, whatever the queue's length.
// Holders beyond the scan (more than maxContendedScan shared holders of
// one path) are not told; phantoms (lost holders under lock-delay) have
// nobody to tell.

// maxContendedScan bounds the requests one list walk looks at.
const maxContendedScan = 64

// tellContended emits EventLockContended for the command's queued
// requests that are still blocked.
func (c *cmdCtx) tellContended() {
	if len(c.queued) == 0 {
		return
	}
	ix := c.locks()
	for _, w := range c.queued {
		if w.granted || w.pending || ix.byNode[w.node] != w {
			continue // runnable, or gone again in the same command
		}
		lp := w.path
		below := &lp.sub
		if w.mode == namespace.LockShared {
			below = &lp.subX
		}
		c.contendedIn(w, below)
		for a := lp.parent; a != nil; a = a.parent {
			q := &a.queue
			if w.mode == namespace.LockShared {
				q = &a.xqueue
			}
			c.contendedIn(w, q)
		}
	}
}

// contendedIn emits EventLockContended for the held requests at the front
// of l that conflict with waiter w.
func (c *cmdCtx) contendedIn(w *lockReq, l *list.List) {
	n := 0
	for e := l.Front(); e != nil && n < maxContendedScan; e = e.Next() {
		q := reqOf(e)
		if q.rev >= w.rev {
			return
		}
		n++
		if !q.granted || q.phantom || q.session == w.session || !q.conflicts(w.lockPath(), w.mode) {
			continue
		}
		c.events = append(c.events, namespace.Event{Type: namespace.EventLockContended, Path: q.node, Rev: c.index, Session: q.session,
			Lock: &namespace.LockNote{Token: q.token, Mode: q.mode, Waiter: w.node, WaiterSession: w.session}})
	}
}

// tellWaiting emits EventLockContended for q, granted now, when a
// conflicting request already waits behind it (one event, naming the
// first such request found: q's path's first blocked request, the
// earliest conflicting one blocked below it, or an ancestor's first
// blocked request).
// A holder granted after others queued behind it learns of them from its
// grant's revision, as one granted first learns of later arrivals.
func (c *cmdCtx) tellWaiting(q *lockReq) {
	lp := q.path
	tell := func(w *lockReq) bool {
		if w == nil || w.rev <= q.rev || w.session == q.session || !q.conflicts(w.lockPath(), w.mode) {
			return false
		}
		c.events = append(c.events, namespace.Event{Type: namespace.EventLockContended, Path: q.node, Rev: c.index, Session: q.session,
			Lock: &namespace.LockNote{Token: q.token, Mode: q.mode, Waiter: w.node, WaiterSession: w.session}})
		return true
	}
	if tell(lp.frontier) {
		return
	}
	told, n := false, 0
	lp.below.ascend(revKey(q.rev), func(_ setKey, w *lockReq) bool {
		told = tell(w)
		n++
		return !told && n < maxContendedScan
	})
	if told {
		return
	}
	for a := lp.parent; a != nil; a = a.parent {
		if tell(a.frontier) {
			return
		}
	}
}
