package client

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latch-io/latch/session"
)

// The client cache (Chubby's). A Cached read is answered from the cache
// when it holds the node and the cache lease is good; otherwise it is a
// linearizable Get on the leader that asks to cache the node (Cache) on
// the connection's cache stream, opened the first time. The leader sends
// an invalidation on that stream before it acknowledges a write that
// changes a cached node, and waits for the client's ack (or for the lease
// to run out): the client drops the node, then acks.
//
//   - The lease: the cache serves nothing until the leader granted a lease
//     (a MsgCacheRenew answered after the leader confirmed its
//     leadership); it is good until the renewal's send time plus the
//     lease the leader names. A read within the last half of the lease
//     renews it in the background. Grants come on the stream after every
//     invalidation sent before them, so a granted lease never revives a
//     copy the leader invalidated.
//   - A fill in flight when an invalidation of its node arrives is not
//     cached (its answer may predate the write), nor one whose stream or
//     connection changed meanwhile.
//   - The whole cache is dropped when the stream ends (the leader dropped
//     it, its connection broke) or the client's connection to the leader
//     changes: a new leader knows no caches, so it invalidates nothing.
//   - At most Config.CacheNodes nodes: beyond it a Cached read is answered
//     by the leader without caching, until invalidations free room.
type clientCache struct {
	c   *Client
	max int

	mu       sync.Mutex
	d        *session.Duplex // the cache stream; nil: none
	gen      uint64          // the leader link d is on
	opening  bool
	epoch    uint64 // bumped whenever the cache is dropped
	lease    time.Duration
	leaseEnd time.Time
	renewals []time.Time // send times of renewals not granted yet, oldest first
	entries  map[string]cacheEntry
	bytes    int
	fills    map[string]*cacheFill
	// servePastLease is a bug planted by tests, for the checkers to
	// catch: the cache answers from its entries after the lease ran out.
	servePastLease bool

	hits, misses, invalidations, drops atomic.Uint64
}

type cacheEntry struct {
	exists bool
	data   []byte
	stat   Stat
}

type cacheFill struct {
	n       int  // fills of the node in flight
	tainted bool // an invalidation of the node arrived meanwhile
}

// cacheEntryBytes is what an entry costs besides its path and data, for
// CacheStats.Bytes.
const cacheEntryBytes = 160

func newClientCache(c *Client, max int) *clientCache {
	return &clientCache{c: c, max: max, entries: map[string]cacheEntry{}, fills: map[string]*cacheFill{}}
}

// CacheStats describes the client cache.
type CacheStats struct {
	Nodes int // nodes cached
	Bytes int // their estimated memory
	// Hits and Misses count Cached reads answered from the cache and by
	// the leader; Invalidations the cached nodes the leader invalidated;
	// Drops how often the whole cache was dropped (its stream or the
	// connection to the leader ended).
	Hits, Misses, Invalidations, Drops uint64
}

// CacheStats returns the client cache's size and counters.
func (c *Client) CacheStats() CacheStats {
	cc := c.cache
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return CacheStats{Nodes: len(cc.entries), Bytes: cc.bytes, Hits: cc.hits.Load(), Misses: cc.misses.Load(),
		Invalidations: cc.invalidations.Load(), Drops: cc.drops.Load()}
}

// current returns the client's leader link, or nil while it reconnects.
func (c *Client) current() *link {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

// read answers a Cached read of path.
func (cc *clientCache) read(ctx context.Context, path string) (cacheEntry, error) {
	l := cc.c.current()
	now := time.Now()
	cc.mu.Lock()
	if cc.d != nil && (l == nil || l.gen != cc.gen) {
		cc.dropLocked(cc.d) // the connection to the leader changed
	}
	if cc.d != nil && (now.Before(cc.leaseEnd) || cc.servePastLease) {
		if e, ok := cc.entries[path]; ok {
			renew := cc.leaseEnd.Sub(now) < cc.lease/2 && cc.mayRenewLocked(now)
			cc.mu.Unlock()
			cc.hits.Add(1)
			if renew {
				cc.renew()
			}
			e.data = bytes.Clone(e.data)
			return e, nil
		}
	}
	cc.mu.Unlock()
	cc.misses.Add(1)
	return cc.fill(ctx, path)
}

// fill reads path from the leader, asking to cache it.
func (cc *clientCache) fill(ctx context.Context, path string) (cacheEntry, error) {
	d := cc.stream(ctx)
	cc.mu.Lock()
	epoch, gen := cc.epoch, cc.gen
	ask := d != nil && cc.d == d && len(cc.entries) < cc.max
	f := cc.fills[path]
	if f == nil {
		f = &cacheFill{}
		cc.fills[path] = f
	}
	f.n++
	cc.mu.Unlock()

	resp, l, err := cc.c.send(ctx, nil, &session.Request{Type: session.MsgGet, Path: path, Cache: ask})
	var e cacheEntry
	absent := errors.Is(err, ErrNoNode)
	if err == nil {
		e = cacheEntry{exists: true, data: resp.Data, stat: resp.Stat}
	}

	cc.mu.Lock()
	tainted := f.tainted
	if f.n--; f.n == 0 {
		delete(cc.fills, path)
	}
	renew := false
	if ask && (err == nil || absent) && resp != nil && resp.Cached && !tainted &&
		cc.d == d && cc.epoch == epoch && l != nil && l.gen == gen {
		if old, ok := cc.entries[path]; ok {
			cc.bytes -= entrySize(path, old)
		}
		cc.entries[path] = cacheEntry{exists: e.exists, data: bytes.Clone(e.data), stat: e.stat}
		cc.bytes += entrySize(path, e)
		now := time.Now()
		renew = !now.Before(cc.leaseEnd) && cc.mayRenewLocked(now)
	}
	cc.mu.Unlock()
	if renew {
		cc.renew()
	}
	if err != nil && !absent {
		return cacheEntry{}, err
	}
	return e, nil // absent: exists false
}

func entrySize(path string, e cacheEntry) int { return len(path) + len(e.data) + cacheEntryBytes }

// mayRenewLocked reports whether a renewal may be sent now: none is
// outstanding, or the last one went unanswered for a whole lease.
func (cc *clientCache) mayRenewLocked(now time.Time) bool {
	n := len(cc.renewals)
	return n == 0 || now.Sub(cc.renewals[n-1]) > cc.lease
}

// stream returns the cache stream on the current leader link, opening it
// when there is none; nil when the leader does not serve the cache or the
// stream cannot be opened now (the read is then answered uncached).
func (cc *clientCache) stream(ctx context.Context) *session.Duplex {
	l, err := cc.c.waitLink(ctx, nil)
	if err != nil {
		return nil
	}
	cc.mu.Lock()
	if cc.d != nil && cc.gen == l.gen {
		d := cc.d
		cc.mu.Unlock()
		return d
	}
	if cc.d != nil {
		cc.dropLocked(cc.d)
	}
	if cc.opening || l.features&session.FeatureCache == 0 {
		cc.mu.Unlock()
		return nil
	}
	cc.opening = true
	cc.mu.Unlock()

	d, lease, err := openCacheStream(ctx, cc.c.ctx, l)
	cc.mu.Lock()
	cc.opening = false
	if err != nil {
		cc.mu.Unlock()
		cc.c.log.Debug("latch: cache stream not opened", "member", l.server, "err", err)
		return nil
	}
	cc.d, cc.gen, cc.lease = d, l.gen, lease
	cc.leaseEnd, cc.renewals = time.Time{}, nil
	cc.mu.Unlock()
	if !cc.c.goFunc(func() { cc.readStream(d) }) {
		d.Close()
		return nil
	}
	cc.renew()
	return d
}

// openCacheStream opens the cache stream on l (living as long as life)
// and reads its acknowledgement, within ctx.
func openCacheStream(ctx, life context.Context, l *link) (*session.Duplex, time.Duration, error) {
	d, err := session.OpenDuplex(life, l.conn, &session.Request{Type: session.MsgCache})
	if err != nil {
		return nil, 0, err
	}
	stop := context.AfterFunc(ctx, func() { d.Close() })
	first, err := d.Next()
	if !stop() {
		err = ctx.Err()
	}
	if err != nil {
		d.Close()
		return nil, 0, err
	}
	if first.TTLMillis <= 0 {
		d.Close()
		return nil, 0, errors.New("latch: cache stream acknowledged without a lease")
	}
	return d, time.Duration(first.TTLMillis) * time.Millisecond, nil
}

// renew asks the leader to renew the cache lease.
func (cc *clientCache) renew() {
	cc.mu.Lock()
	d := cc.d
	if d == nil {
		cc.mu.Unlock()
		return
	}
	// The send time is taken before sending: the lease counts from no
	// later than the leader's confirmation round.
	cc.renewals = append(cc.renewals, time.Now())
	cc.mu.Unlock()
	if err := d.Send(&session.Request{Type: session.MsgCacheRenew}); err != nil {
		cc.drop(d)
	}
}

// readStream applies the leader's invalidations and lease grants until the
// stream ends; then the cache is dropped.
func (cc *clientCache) readStream(d *session.Duplex) {
	defer cc.drop(d)
	for {
		resp, err := d.Next()
		if err != nil {
			return
		}
		switch {
		case len(resp.Names) > 0:
			cc.mu.Lock()
			if cc.d != d {
				cc.mu.Unlock()
				return
			}
			for _, p := range resp.Names {
				if e, ok := cc.entries[p]; ok {
					cc.bytes -= entrySize(p, e)
					delete(cc.entries, p)
				}
				if f := cc.fills[p]; f != nil {
					f.tainted = true
				}
			}
			cc.mu.Unlock()
			cc.invalidations.Add(uint64(len(resp.Names)))
			if err := d.Send(&session.Request{Type: session.MsgCacheAck, FromRev: resp.Rev}); err != nil {
				return
			}
		case resp.TTLMillis > 0:
			cc.mu.Lock()
			if len(cc.renewals) > 0 {
				end := cc.renewals[0].Add(time.Duration(resp.TTLMillis) * time.Millisecond)
				cc.renewals = cc.renewals[1:]
				if end.After(cc.leaseEnd) {
					cc.leaseEnd = end
				}
			}
			cc.mu.Unlock()
		}
	}
}

// drop drops the whole cache if d is still its stream, and closes d.
func (cc *clientCache) drop(d *session.Duplex) {
	cc.mu.Lock()
	cc.dropLocked(d)
	cc.mu.Unlock()
}

func (cc *clientCache) dropLocked(d *session.Duplex) {
	if cc.d == d {
		cc.d = nil
		cc.epoch++
		cc.leaseEnd, cc.renewals = time.Time{}, nil
		clear(cc.entries)
		cc.bytes = 0
		for _, f := range cc.fills {
			f.tainted = true
		}
		cc.drops.Add(1)
	}
	d.Close()
}
