package server

// The client cache's invalidations: what a batch changed is queued on the
// streams caching it as one flush, acknowledgements release it, and writes
// and reads wait on the flushes in flight (cache.go has the whole design).

import (
	"context"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// Applied queues the invalidations of every cached node a batch changed
// and records, per write, the flushes its answer waits for: its own and
// those still in flight on the nodes it changed (a later write of a node
// must not be acknowledged while a cache may still serve a value older
// than an earlier one). It runs on the FSM goroutine and never blocks.
func (t *cacheTable) Applied(results []*namespace.Result) {
	if t.nholders.Load() == 0 && t.nflushes.Load() == 0 {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range results {
		var (
			fl      *cacheFlush
			touched map[*cacheHolder][]string
		)
		for i := range r.Events {
			ev := &r.Events[i]
			if !ev.Type.IsNodeEvent() {
				continue
			}
			hs := t.byPath[ev.Path]
			if len(hs) == 0 {
				continue
			}
			if t.skip.Load() > 0 {
				t.skip.Add(-1)
				continue // the planted bug: this write invalidates nothing
			}
			if fl == nil {
				fl = &cacheFlush{index: r.Index, done: make(chan struct{}), start: now}
				touched = map[*cacheHolder][]string{}
			}
			fl.paths = append(fl.paths, ev.Path)
			for h := range hs {
				touched[h] = append(touched[h], ev.Path)
			}
			for h := range hs {
				t.unregisterLocked(h, ev.Path)
			}
			t.invalidations.Add(uint64(len(hs)))
		}
		if fl != nil {
			for h, paths := range touched {
				h.seq++
				if !h.closed {
					h.queue = append(h.queue, session.Response{Names: paths, Rev: h.seq})
					select {
					case h.notify <- struct{}{}:
					default:
					}
				}
				if now.Before(h.leaseEnd.Add(t.slack)) {
					h.waits = append(h.waits, cacheWait{f: fl, seq: h.seq})
					fl.waiting++
				}
			}
			if fl.waiting > 0 {
				for _, p := range fl.paths {
					m := t.marks[p]
					if m == nil {
						m = &cacheMark{done: make(chan struct{})}
						t.marks[p] = m
					}
					m.n++
				}
				t.nflushes.Add(1)
			}
		}
		t.recordWriteLocked(r)
	}
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// recordWriteLocked notes the marks the answer of the write at r.Index
// waits for: those of every node it changed with flushes in flight.
func (t *cacheTable) recordWriteLocked(r *namespace.Result) {
	if len(t.marks) == 0 {
		return
	}
	var ms []*cacheMark
	for i := range r.Events {
		ev := &r.Events[i]
		if m := t.marks[ev.Path]; m != nil && ev.Type.IsNodeEvent() {
			ms = append(ms, m)
		}
	}
	if len(ms) == 0 {
		return
	}
	t.writes[r.Index] = ms
	t.order = append(t.order, r.Index)
	// Forget the oldest records once their flushes are done (nobody
	// waits for writes proposed elsewhere, or already answered).
	for len(t.order) > 0 && marksDone(t.writes[t.order[0]]) {
		delete(t.writes, t.order[0])
		t.order = t.order[1:]
	}
}

func marksDone(ms []*cacheMark) bool {
	for _, m := range ms {
		select {
		case <-m.done:
		default:
			return false
		}
	}
	return true
}

// releaseLocked counts one stream of f as done and ends f after the last.
func (t *cacheTable) releaseLocked(f *cacheFlush) {
	f.waiting--
	if f.waiting > 0 {
		return
	}
	close(f.done)
	t.latency.Observe(time.Since(f.start).Seconds())
	t.nflushes.Add(-1)
	for _, p := range f.paths {
		m := t.marks[p]
		m.n--
		if m.n == 0 {
			close(m.done)
			delete(t.marks, p)
		}
	}
}

// ack records that h's client applied every invalidation up to seq.
func (t *cacheTable) ack(h *cacheHolder, seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h.gone || seq <= h.acked {
		return
	}
	h.acked = min(seq, h.seq)
	keep := h.waits[:0]
	for _, w := range h.waits {
		if w.seq <= h.acked {
			t.releaseLocked(w.f)
		} else {
			keep = append(keep, w)
		}
	}
	h.waits = keep
	select {
	case h.acks <- struct{}{}:
	default:
	}
}

// waitWrite returns when the invalidations the write applied at index
// waits for are done (at once when it changed no node with one in flight).
func (t *cacheTable) waitWrite(ctx context.Context, index uint64) error {
	if t == nil || t.nflushes.Load() == 0 {
		return nil
	}
	t.mu.Lock()
	ms := t.writes[index]
	t.mu.Unlock()
	for _, m := range ms {
		select {
		case <-m.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// gate returns when no invalidation of p that a read may have seen the
// write of is in flight. A write is visible to a read once applied, and its
// flush exists once its batch is observed: a stable read (stableRead: no
// batch in progress around it) saw only observed batches, so with no flush
// in flight anywhere nothing is to wait for; else the batch in progress at
// gen ends first, then p's marks are waited out.
func (t *cacheTable) gate(ctx context.Context, p string, stable bool, gen uint64) error {
	if stable && t.nflushes.Load() == 0 {
		return nil
	}
	if gen%2 == 1 {
		if err := t.gen.Wait(ctx, gen+1); err != nil {
			return err
		}
	}
	for {
		t.mu.Lock()
		m := t.marks[p]
		t.mu.Unlock()
		if m == nil {
			return nil
		}
		select {
		case <-m.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
