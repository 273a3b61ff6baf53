package server

// The client cache's fan-out window: a write of a node cached by many
// connections sends their invalidations a window at a time, so that the
// member's other work is never queued behind the whole fan-out (cache.go
// has the whole design).
//
// Each invalidation costs the leader a stream write, a packet sent and one
// read back (the ack) on that client's connection, each on goroutines of
// their own (the stream's writer, the connection's quic-go loops, the
// stream's reader). Written all at once, a write cached by 1,000
// connections made thousands of goroutines runnable together, and every
// other goroutine waited its turn behind them: the liveness echo of the
// writer's own connection (session.(*Conn).EchoPings), raft's heartbeats,
// other clients' requests. The writer's client, which heard nothing while
// its write waited, gave the connection up ("member silent") with the
// write in flight, and its outcome was unknown. With at most cacheWindow
// streams between writing an invalidation and reading its ack, whatever
// else the member does waits behind a window, not behind the fan-out,
// while the fan-out keeps the window full (it takes no more CPU).
//
// It paces only where acks come back within cacheSlotHold: on a machine
// too loaded for that (README: acks slower than 5 ms for most of 1,000
// cachers at load 17-20) it degrades to a rate of cacheWindow starts per
// cacheSlotHold, and a fan-out that needs more CPU than the cache lease
// still ends with the lease and the unacknowledging streams dropped.
//
// A stream keeps its place until its client acknowledges, or for
// cacheSlotHold at most: a client that is slow or unreachable holds a
// place only that long (its flushes still wait for its ack or its lease,
// as before), so the window bounds the rate at which invalidations start
// (cacheWindow per cacheSlotHold at worst), never stalls it.

import (
	"context"
	"time"

	"github.com/latch-io/latch/session"
)

const (
	// cacheWindow is how many cache streams may have an invalidation
	// written and not yet acknowledged at once, member-wide: enough to
	// keep two cores busy with acks on loopback (round trips of a few
	// hundred µs), few enough that an echo behind them waits for
	// milliseconds, not for the fan-out.
	cacheWindow = 32
	// cacheSlotHold is the longest one stream keeps its place waiting for
	// its client's ack.
	cacheSlotHold = 5 * time.Millisecond
)

// lastInvalidation returns the sequence number of the last invalidation in
// batch, 0 when it holds none (only lease grants, which take no place).
func lastInvalidation(batch []session.Response) uint64 {
	for i := len(batch) - 1; i >= 0; i-- {
		if len(batch[i].Names) > 0 {
			return batch[i].Rev
		}
	}
	return 0
}

// enter takes a place in the window for h's next invalidations; false when
// the stream ended first. Waiters get places in the order they asked.
func (t *cacheTable) enter(ctx context.Context, h *cacheHolder) bool {
	select {
	case t.window <- struct{}{}:
		t.windowed.Add(1)
		return true
	case <-h.dropped:
	case <-ctx.Done():
	}
	return false
}

// exit gives a place back.
func (t *cacheTable) exit() { <-t.window }

// leave gives h's place back once its client acknowledged seq, or after
// cacheSlotHold (counted in slow), or when the stream ends.
func (t *cacheTable) leave(ctx context.Context, h *cacheHolder, seq uint64) {
	defer t.exit()
	timer := time.NewTimer(cacheSlotHold)
	defer timer.Stop()
	for {
		t.mu.Lock()
		done := h.acked >= seq || h.gone
		t.mu.Unlock()
		if done {
			return
		}
		select {
		case <-h.acks:
		case <-timer.C:
			t.slow.Add(1)
			return
		case <-h.dropped:
			return
		case <-ctx.Done():
			return
		}
	}
}
