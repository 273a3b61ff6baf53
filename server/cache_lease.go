package server

// The client cache's leases: grants queued behind invalidations, and the
// streams dropped when a lease ran out with flushes waiting or a snapshot
// restore replaced the state (cache.go has the whole design).

import (
	"time"

	"github.com/latch-io/latch/session"
)

// extend moves h's lease end to end (never back).
func (t *cacheTable) extend(h *cacheHolder, end time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if end.After(h.leaseEnd) {
		h.leaseEnd = end
	}
}

// grant queues a lease grant behind every invalidation queued so far.
// After a snapshot restore it grants none: every stream is dropped instead
// (checkRestore), so no cache outlives the state it copied by more than
// the lease it holds.
func (t *cacheTable) grant(h *cacheHolder) {
	if t.checkRestore() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if h.gone || h.closed {
		return
	}
	h.queue = append(h.queue, session.Response{TTLMillis: t.lease.Milliseconds()})
	select {
	case h.notify <- struct{}{}:
	default:
	}
}

// run drops the streams whose lease ran out while flushes wait for them.
func (t *cacheTable) run() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := t.expire(time.Now())
		if next.IsZero() {
			timer.Reset(time.Hour)
		} else {
			timer.Reset(time.Until(next))
		}
		select {
		case <-t.stop:
			return
		case <-t.wake:
		case <-timer.C:
		}
	}
}

// checkRestore drops every stream when a snapshot was installed since the
// last look, and reports whether it did.
func (t *cacheTable) checkRestore() bool {
	n := t.restores()
	t.mu.Lock()
	if n == t.restored {
		t.mu.Unlock()
		return false
	}
	t.restored = n
	all := make([]*cacheHolder, 0, len(t.holders))
	for _, h := range t.holders {
		all = append(all, h)
	}
	t.mu.Unlock()
	for _, h := range all {
		t.drop(h)
	}
	return true
}

// expire drops every open stream whose lease (plus slack) ended by now
// with flushes waiting for it, and every ended stream whose lease ended;
// it returns the next such end (zero: none).
func (t *cacheTable) expire(now time.Time) time.Time {
	var lapsed []*cacheHolder
	var next time.Time
	t.mu.Lock()
	look := func(h *cacheHolder) {
		end := h.leaseEnd.Add(t.slack)
		if !now.Before(end) {
			lapsed = append(lapsed, h)
		} else if next.IsZero() || end.Before(next) {
			next = end
		}
	}
	for _, h := range t.holders {
		if len(h.waits) > 0 {
			look(h)
		}
	}
	for h := range t.closing {
		look(h)
	}
	t.mu.Unlock()
	for _, h := range lapsed {
		t.drop(h)
	}
	return next
}
