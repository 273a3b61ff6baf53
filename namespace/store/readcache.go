package store

import (
	"encoding/binary"
)

// readCache keeps the records commands read and write, decoded, exactly as
// badger holds them, so that a command does not go to badger for what an
// earlier command (in this batch or an earlier one) read or wrote: a lock
// cycle reads its session, its lock path and the history counters over and
// over, and each badger read walks the memtables and the levels.
//
// It changes no outcome: a hit returns what the transaction would. That
// holds because the apply path is the only writer while the store is open
// and every write it makes goes through cmdCtx.flush, which updates the
// cache with the transaction (every node; the raw keys it holds); a
// commit that fails (batch.fail) and Restore drop the whole cache, since
// badger then holds something else. Only ApplyBatch and Restore use it,
// under Store.mu.
//
// Values that badger keeps in the value log (node data of valueThreshold
// or more) are never cached: they are read, and their checksums checked,
// every time, as before. The others live in the LSM tree, whose tables
// are verified whole when opened. Memory is bounded by readCacheBytes;
// when an entry would not fit, the cache starts over empty (a working set
// larger than the cache misses anyway).
type readCache struct {
	nodes map[string]cachedNode // by path
	raw   map[string]cachedRaw  // by key
	bytes int                   // estimated memory held
}

// cachedNode is a node held by value, so that caching one costs no
// allocation of its own.
type cachedNode struct {
	n  node
	ok bool // false: no node there
}

type cachedRaw struct {
	v  []byte
	ok bool // false: the key is absent
}

const (
	readCacheBytes = 8 << 20
	// cacheEntryOverhead is a map slot, a key header and a node struct.
	cacheEntryOverhead = 160
	// maxNodeHeader bounds what appendNode writes before the data (a
	// format byte and nine varints).
	maxNodeHeader = 1 + 9*binary.MaxVarintLen64
)

func newReadCache() *readCache {
	return &readCache{nodes: map[string]cachedNode{}, raw: map[string]cachedRaw{}}
}

// reset drops everything: badger's state is no longer what was cached.
func (rc *readCache) reset() {
	clear(rc.nodes)
	clear(rc.raw)
	rc.bytes = 0
}

// node returns a copy of the cached node at p, whether there is a node
// there, and whether p is cached. The data is shared and never written in
// place.
func (rc *readCache) node(p string) (n node, exists, found bool) {
	c, found := rc.nodes[p]
	return c.n, c.ok, found
}

// putNode records the node at p as badger now has it (nil: absent). It
// keeps its own copy, so the caller may go on changing n.
func (rc *readCache) putNode(p string, n *node) {
	vlen := 0
	if n != nil {
		vlen = len(n.data) + maxNodeHeader
	}
	size := len(p) + cacheEntryOverhead + vlen
	if old, ok := rc.nodes[p]; ok {
		rc.bytes -= len(p) + cacheEntryOverhead
		if old.ok {
			rc.bytes -= len(old.n.data) + maxNodeHeader
		}
		delete(rc.nodes, p)
	}
	if !rc.fits(size, vlen) {
		return
	}
	c := cachedNode{ok: n != nil}
	if n != nil {
		c.n = *n
	}
	rc.nodes[p] = c
	rc.bytes += size
}

// getRaw returns the cached value of key and whether key is cached.
func (rc *readCache) getRaw(key []byte) (v []byte, ok, found bool) {
	c, found := rc.raw[string(key)]
	return c.v, c.ok, found
}

// putRaw records key's value as badger now has it (ok false: absent). v
// must not change afterwards (badger keeps it until commit too).
func (rc *readCache) putRaw(key string, v []byte, ok bool) {
	size := len(key) + len(v) + cacheEntryOverhead
	if old, found := rc.raw[key]; found {
		rc.bytes -= len(key) + len(old.v) + cacheEntryOverhead
		delete(rc.raw, key)
	}
	if !rc.fits(size, len(v)) {
		return
	}
	rc.raw[key] = cachedRaw{v: v, ok: ok}
	rc.bytes += size
}

// updateRaw is putRaw for a key that is cached, and nothing for one that
// is not.
func (rc *readCache) updateRaw(key string, v []byte, ok bool) {
	if _, found := rc.raw[key]; found {
		rc.putRaw(key, v, ok)
	}
}

// fits makes room for an entry of size bytes holding a value of vlen,
// reporting false when the value is not to be cached.
func (rc *readCache) fits(size, vlen int) bool {
	if vlen >= valueThreshold {
		return false
	}
	if rc.bytes+size > readCacheBytes {
		rc.reset()
	}
	return true
}
