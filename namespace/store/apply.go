package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/latch-io/latch/namespace"
)

// ApplyBatch applies consecutive entries in as few badger transactions as
// fit (usually one), each writing the applied index with the effects. It
// returns one Result per entry.
func (s *Store) ApplyBatch(entries []namespace.BatchEntry) []*namespace.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*namespace.Result, len(entries))
	// One allocation for the batch's results, and room for one or two
	// events each: a batch costs a few allocations, not a few per entry.
	// A result kept alive keeps its batch's arrays with it; the server's
	// observers copy the events they keep, and a proposer holds its
	// result only while it answers.
	results := make([]namespace.Result, len(entries))
	b := s.newBatch()
	b.events = make([]namespace.Event, 0, 2*len(entries))
	c := newCmdCtx(b)
	for i := range entries {
		e := &entries[i]
		r := &results[i]
		r.Index = e.Index
		out[i] = r
		switch {
		case b.err != nil:
			r.Err = b.err
			continue
		case e.Index <= b.applied:
			r.Err = fmt.Errorf("%w: index %d <= %d", namespace.ErrAlreadyApplied, e.Index, b.applied)
			continue
		}
		c.reset(e.Index, max(b.clock, e.Time))
		c.apply(e.Cmd, r)
		if r.Err == nil {
			c.finishLocks(r)
		}
		if r.Err == nil && c.historyErr != nil {
			// The lock history could not be read: a storage failure.
			r.Err = c.historyErr
			if !errors.Is(r.Err, namespace.ErrStorage) {
				r.Err = fmt.Errorf("%w: lock history: %w", namespace.ErrStorage, r.Err)
			}
		}
		if errors.Is(r.Err, namespace.ErrStorage) {
			// Not a refusal but a store that cannot be trusted: nothing
			// of this batch is recorded (integrity.go).
			b.fail(r.Err)
			r.Err, r.Events = b.err, nil
			continue
		}
		if r.Err != nil {
			r.Events = nil
			b.pending = append(b.pending, r)
			b.applied = e.Index
			continue
		}
		r.Events = b.keepEvents(c.events)
		b.add(c, r)
		if e.Cmd.Op == namespace.OpHashCheck && r.Err == nil && b.commitAndRenew() {
			r.HashView = s.readView()
		}
	}
	b.commit()
	return out
}

// batch is the badger transaction the commands of one ApplyBatch write
// into, with the applied index and clock it will record.
type batch struct {
	s   *Store
	txn *badger.Txn
	err error // a commit failed; the store is broken

	count, bytes int64 // estimated size of txn, as badger counts it

	applied uint64 // applied index once txn commits
	clock   int64
	pending []*namespace.Result // results of the commands in txn, failed on a commit error
	arena   []byte              // what carve cuts from
	nodes   []node              // what newNode cuts from
	// events holds the events of the batch's commands back to back: each
	// command appends to the free room after them (cmdCtx.reset) and
	// keepEvents claims what a successful one made.
	events []namespace.Event

	acl    *aclTable      // the rules as of the last successful command; published on commit
	limits *limitsInForce // the settings the next command runs under; published on commit
}

func (s *Store) newBatch() *batch {
	b := &batch{s: s, applied: s.applied.Load(), clock: s.clock, acl: s.acl.Load(), limits: s.limits.Load()}
	switch {
	case s.closed.Load():
		b.err = namespace.ErrClosed
	case s.broken != nil:
		b.err = s.broken
	case s.Err() != nil:
		b.err = s.Err()
	default:
		b.txn = s.db.NewTransaction(true)
	}
	return b
}

// The chunks carve cuts keys and values from start small (a batch of one
// command writes a few hundred bytes) and double up to maxArenaChunk.
const (
	minArenaChunk = 1 << 10
	maxArenaChunk = 64 << 10
)

// carve returns an empty slice with capacity n for a key or value handed
// to badger, which keeps it until commit: one allocation serves many.
func (b *batch) carve(n int) []byte {
	if n > maxArenaChunk/8 {
		return make([]byte, 0, n)
	}
	if cap(b.arena)-len(b.arena) < n {
		size := min(max(2*cap(b.arena), minArenaChunk), maxArenaChunk)
		for size < n {
			size *= 2
		}
		b.arena = make([]byte, 0, size)
	}
	l := len(b.arena)
	b.arena = b.arena[:l+n]
	return b.arena[l : l : l+n]
}

// keepEvents returns a successful command's events for its result, capped
// so that appending to them cannot reach the next command's, and claims
// the room they took in b.events. Events that outgrew that room were
// moved by append and take none of it.
func (b *batch) keepEvents(evs []namespace.Event) []namespace.Event {
	if len(evs) == 0 {
		return nil
	}
	if n := len(b.events) + len(evs); n <= cap(b.events) {
		b.events = b.events[:n]
	}
	return evs[:len(evs):len(evs)]
}

// newNode returns a new node holding a copy of n. Nodes a batch reads or
// makes are cut from chunks: the batch's commands never free one, and
// nothing keeps one past the batch but the read cache, which copies.
func (b *batch) newNode(n *node) *node {
	if len(b.nodes) == cap(b.nodes) {
		b.nodes = make([]node, 0, min(max(2*cap(b.nodes), 8), 256))
	}
	b.nodes = append(b.nodes, *n)
	return &b.nodes[len(b.nodes)-1]
}

// add moves a successful command's writes into the transaction, committing
// first when they would not fit.
func (b *batch) add(c *cmdCtx, r *namespace.Result) {
	if b.count+c.count > b.s.maxTxnCount || b.bytes+c.bytes > b.s.maxTxnBytes {
		if !b.commitAndRenew() {
			r.Err, r.Events = b.err, nil
			return
		}
	}
	if err := c.flush(); err != nil {
		b.fail(err)
		r.Err, r.Events = b.err, nil
		return
	}
	b.pending = append(b.pending, r)
	b.applied, b.clock = c.index, c.now
	if c.aclNext != nil {
		b.acl = c.aclNext
	}
	if c.newLimits != nil {
		b.limits = c.newLimits
	}
}

// commit writes the meta keys and commits the transaction.
func (b *batch) commit() {
	if b.err != nil {
		if b.txn != nil {
			b.txn.Discard()
		}
		return
	}
	defer b.txn.Discard()
	if b.applied == b.s.applied.Load() && b.clock == b.s.clock && b.count == 0 {
		return // nothing new: every entry was skipped
	}
	err := b.txn.Set(metaApplied, binary.BigEndian.AppendUint64(nil, b.applied))
	if err == nil {
		err = b.txn.Set(metaClock, binary.BigEndian.AppendUint64(nil, uint64(b.clock)))
	}
	if err == nil {
		err = b.txn.Commit()
	}
	if err != nil {
		b.fail(err)
		return
	}
	b.s.applied.Store(b.applied)
	b.s.clock = b.clock
	b.s.acl.Store(b.acl)
	b.s.limits.Store(b.limits)
	b.pending = b.pending[:0]
	b.count, b.bytes = 0, 0
}

// commitAndRenew commits what the batch holds and opens a new transaction.
func (b *batch) commitAndRenew() bool {
	b.commit()
	if b.err != nil {
		return false
	}
	b.txn = b.s.db.NewTransaction(true)
	return true
}

// fail marks the store broken: the FSM cannot go on after a lost write or
// a failed read, and every result whose effects were in the discarded
// transaction says so.
func (b *batch) fail(err error) {
	if !errors.Is(err, namespace.ErrStorage) {
		err = fmt.Errorf("%w: commit: %w", namespace.ErrStorage, err)
	}
	b.err = b.s.fault(err)
	b.s.broken = b.err
	b.s.cache.reset() // it may hold writes of the discarded transaction
	if b.txn != nil {
		b.txn.Discard()
	}
	for _, r := range b.pending {
		r.Err, r.Events = b.err, nil
	}
	b.pending = nil
}

// cmdCtx is the context one command runs in. Its writes go to an overlay
// that reads see, and reach the transaction only when the command succeeds,
// so a failed command changes nothing and a multi needs no undo.
type cmdCtx struct {
	b      *batch
	index  uint64
	now    int64
	events []namespace.Event

	nodes map[string]overlayNode // by path
	raw   map[string]overlayRaw  // by key

	count, bytes int64 // estimated transaction cost of the overlay

	// lockOps are the command's changes to the lock index, applied when
	// it succeeds (or at a checkpoint); lockCause is why removeNode is
	// removing a node, for lock requests.
	lockOps []lockOp
	// endingOps are the command's changes to the ending sessions (applied
	// with lockOps); endBudget is how many more ephemerals of ending
	// sessions it may delete (MaxLockBatch per command, session.go).
	endingOps []endingOp
	endBudget int
	lockCause lockCause
	// tryReq is the command's try-lock request: granted by this command
	// whatever MaxLockBatch leaves for later.
	tryReq *lockReq
	// queued are the lock requests the command queued: those still
	// blocked when it ends tell the holders they conflict with
	// (lockcontended.go).
	queued []*lockReq

	// identity is the command's Identity (a multi's for its ops); aclNext
	// is the rule table an ACL op made, adopted when the command succeeds.
	identity  string
	aclNext   *aclTable
	newLimits *limitsInForce // set by a successful OpSetLimits

	historyErr error // the lock history failed to record (lockhistory.go)
}

type overlayNode struct {
	n     *node // nil: absent
	dirty bool
}

type overlayRaw struct {
	v       []byte
	deleted bool
}

func newCmdCtx(b *batch) *cmdCtx {
	return &cmdCtx{b: b, nodes: map[string]overlayNode{}, raw: map[string]overlayRaw{}}
}

func (c *cmdCtx) reset(index uint64, now int64) {
	c.index, c.now = index, now
	// The free room after the batch's events so far (batch.keepEvents).
	c.events = c.b.events[len(c.b.events):]
	c.lockOps = c.lockOps[:0]
	c.tryReq = nil
	c.queued = c.queued[:0]
	c.lockCause = causeDelete
	c.identity, c.aclNext = "", nil
	c.newLimits = nil
	c.historyErr = nil
	c.endingOps = c.endingOps[:0]
	c.endBudget = c.limits().MaxLockBatch
	c.clearOverlay()
}

func (c *cmdCtx) clearOverlay() {
	clear(c.nodes)
	clear(c.raw)
	c.count, c.bytes = 0, 0
}

func (c *cmdCtx) emit(t namespace.EventType, path string, session uint64) {
	c.events = append(c.events, namespace.Event{Type: t, Path: path, Rev: c.index, Session: session})
}

// node returns the node at p or nil; callers may modify it and then call
// putNode.
func (c *cmdCtx) node(p string) (*node, error) {
	if o, ok := c.nodes[p]; ok {
		return o.n, nil
	}
	cache := c.b.s.cache
	if cn, exists, found := cache.node(p); found {
		var n *node
		if exists {
			n = c.b.newNode(&cn) // the caller may change it
		}
		c.nodes[p] = overlayNode{n: n}
		return n, nil
	}
	item, err := c.b.txn.Get(nodeKey(p))
	if errors.Is(err, badger.ErrKeyNotFound) {
		c.nodes[p] = overlayNode{}
		cache.putNode(p, nil)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %w", namespace.ErrStorage, p, err)
	}
	v, err := valueCopy(item)
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %w", namespace.ErrStorage, p, err)
	}
	n, err := decodeNode(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	c.nodes[p] = overlayNode{n: n}
	cache.putNode(p, n)
	return n, nil
}

func (c *cmdCtx) putNode(p string, n *node) {
	if !c.nodes[p].dirty {
		c.account(len(p)+2, len(n.data)+32)
	}
	c.nodes[p] = overlayNode{n: n, dirty: true}
}

func (c *cmdCtx) deleteNode(p string) {
	c.nodes[p] = overlayNode{dirty: true}
	c.account(len(p)+2, 0)
}

// getRaw reads a non-node key; ok is false when it is absent.
func (c *cmdCtx) getRaw(key []byte) (v []byte, ok bool, err error) {
	if o, found := c.raw[string(key)]; found {
		return o.v, !o.deleted, nil
	}
	cache := c.b.s.cache
	if v, ok, found := cache.getRaw(key); found {
		return v, ok, nil
	}
	v, ok, err = getValue(c.b.txn, key)
	if err != nil {
		return nil, false, fmt.Errorf("%w: read %q: %w", namespace.ErrStorage, key, err)
	}
	cache.putRaw(string(key), v, ok)
	return v, ok, nil
}

func (c *cmdCtx) putRaw(key, v []byte) {
	c.raw[string(key)] = overlayRaw{v: v}
	c.account(len(key), len(v))
}

func (c *cmdCtx) deleteRaw(key []byte) {
	c.raw[string(key)] = overlayRaw{deleted: true}
	c.account(len(key), 0)
}

// account adds one write to the overlay's estimated transaction cost, the
// way badger's Txn.checkSize counts it (plus slack).
func (c *cmdCtx) account(keyLen, valLen int) {
	v := int64(valLen)
	if v >= c.b.s.valueThreshold {
		v = 12 // a value pointer
	}
	c.count++
	c.bytes += int64(keyLen) + v + 16
}

// flush writes the overlay into the transaction, and into the read cache
// (readcache.go), which must hold what the transaction holds.
func (c *cmdCtx) flush() error {
	txn := c.b.txn
	cache := c.b.s.cache
	for p, o := range c.nodes {
		if !o.dirty {
			continue
		}
		cache.putNode(p, o.n)
		key := appendNodeKey(c.b.carve(len(p)+2), p)
		var err error
		if o.n == nil {
			err = txn.Delete(key)
		} else {
			// The encoding is copied: badger keeps the slice until commit.
			err = txn.Set(key, appendNode(c.b.carve(maxNodeHeader+len(o.n.data)), o.n))
		}
		if err != nil {
			return err
		}
	}
	for k, o := range c.raw {
		// Only keys a command read are cached: most raw writes (lock
		// records, ephemeral markers, history records) are never read.
		cache.updateRaw(k, o.v, !o.deleted)
		key := append(c.b.carve(len(k)), k...)
		var err error
		if o.deleted {
			err = txn.Delete(key)
		} else {
			err = txn.Set(key, o.v)
		}
		if err != nil {
			return err
		}
	}
	c.b.count += c.count
	c.b.bytes += c.bytes
	return nil
}

// checkpoint commits the work done so far by a command that is safe to
// resume (ending sessions) when its writes outgrow one transaction. The
// applied index stays at the previous command, so after a crash the log
// replays this command, which finishes on the partly ended state and
// reaches the same final state as an uninterrupted run.
func (c *cmdCtx) checkpoint() error {
	if c.count < c.b.s.maxTxnCount/2 && c.bytes < c.b.s.maxTxnBytes/2 {
		return nil
	}
	b := c.b
	if !b.commitAndRenew() { // the commands before this one
		return b.err
	}
	// The lock changes so far go with the nodes they belong to, so a
	// replay after a crash finds them done; pending grants are derived
	// state and wait for the end of the command.
	c.applyLockOps()
	if err := c.flush(); err != nil {
		b.fail(err)
		return b.err
	}
	if !b.commitAndRenew() {
		return b.err
	}
	c.clearOverlay()
	if hook := b.s.afterCheckpoint; hook != nil {
		if err := hook(); err != nil {
			b.fail(err)
			return b.err
		}
	}
	return nil
}

// apply runs one command, filling r.
func (c *cmdCtx) apply(cmd *namespace.Command, r *namespace.Result) {
	if cmd == nil {
		r.Err = fmt.Errorf("%w: nil command", namespace.ErrBadCommand)
		return
	}
	c.identity = cmd.Identity
	var err error
	switch cmd.Op {
	case namespace.OpNoop:
		err = c.fireLockTimers()
		if err == nil {
			err = c.continueEnding()
		}
	case namespace.OpCreate:
		err = c.create(cmd, r)
	case namespace.OpSet:
		err = c.set(cmd, r)
	case namespace.OpDelete:
		err = c.delete(cmd)
	case namespace.OpCheck:
		err = c.check(cmd, r)
	case namespace.OpMulti:
		err = c.multi(cmd, r)
	case namespace.OpTxn:
		err = c.txn(cmd, r)
	case namespace.OpGet:
		err = fmt.Errorf("%w: get is a txn op; read with Store.Get", namespace.ErrBadCommand)
	case namespace.OpSessionOpen:
		err = c.openSession(cmd, r)
	case namespace.OpSessionClose:
		err = c.closeSession(cmd)
	case namespace.OpSessionExpire:
		err = c.expireSessions(cmd, r)
	case namespace.OpSetMember:
		err = c.setMember(cmd)
	case namespace.OpRemoveMember:
		err = c.removeMember(cmd)
	case namespace.OpLockRequest:
		err = c.lockRequest(cmd, r)
	case namespace.OpLockCancel:
		err = c.lockCancel(cmd)
	case namespace.OpLockRelease:
		err = c.lockRelease(cmd)
	case namespace.OpLockRenew:
		err = c.lockRenew(cmd)
	case namespace.OpACLBootstrap:
		err = c.aclBootstrap(cmd)
	case namespace.OpACLSet:
		err = c.aclChange(cmd, false)
	case namespace.OpACLRemove:
		err = c.aclChange(cmd, true)
	case namespace.OpSetLimits:
		err = c.setLimits(cmd)
	case namespace.OpHashCheck:
		// nothing: the applied index and clock only
	default:
		err = fmt.Errorf("%w: unknown op %d", namespace.ErrBadCommand, cmd.Op)
	}
	r.Err = err
}
