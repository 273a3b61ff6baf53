package store

import (
	"container/list"
	"math"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/latch-io/latch/namespace"
)

// lockIndex is the in-memory form of the lock requests, derived from the
// records in badger (which stay the source of truth): Open and Restore
// rebuild it, and every command changes both in step. It answers "which
// requests can run now" without scanning queues.
//
// Terms. A request is runnable when no earlier conflicting request remains;
// granted requests are runnable, and runnable requests that are not granted
// yet are pending (granted in revision order, MaxLockBatch per command).
// Within one path's queue the runnable requests form a prefix: a blocked
// request blocks every later one at the same path (a later exclusive
// conflicts with the same blocker; a later shared conflicts with the
// blocker when it is exclusive, and otherwise the blocked request itself is
// exclusive and earlier). So each path keeps a frontier, its first blocked
// request, and only frontiers need re-checking when something is removed.
//
// Checking one request costs O(depth): a path keeps its requests in
// revision order (queue, and xqueue for the exclusive ones), and the
// requests of its whole subtree, itself included, in revision order (sub,
// subX). New requests always carry the largest revision, so every list only
// ever grows at its back and its front is the minimum.
//
// Removing request q (revision r) at path Q can make runnable only:
//   - the frontier of Q and of each ancestor of Q, when it is after q;
//   - frontiers below Q with a revision in (r, hi), hi being the earliest
//     exclusive request at Q or an ancestor (anything after hi is still
//     blocked by it). Each path keeps the frontiers of its strict subtree in
//     an ordered set (below) for this range query.
//
// So a release costs O(depth² + log n), plus O(depth + log n) for each
// request it makes runnable and for each lock below it whose first waiter
// falls in the window (those waited for it, or for a request between it
// and them): never for the waiters queued behind it on its own path, nor
// for unrelated locks.
type lockIndex struct {
	// mu guards everything below against concurrent readers; the one
	// writer (apply, under Store.mu) reads without it and holds it to
	// change anything.
	mu sync.RWMutex

	paths     map[string]*lockPath
	byNode    map[string]*lockReq   // live requests (not phantoms) by node path
	bySession map[uint64][]*lockReq // live requests by session, unordered
	ownCounts ownCounts             // live requests by session and path
	byReqID   map[reqIDKey]*lockReq // live requests by session and request id
	pending   lockSet               // runnable, not granted, by revision
	timers    lockSet               // hold deadlines and lock-delay ends, by (time, revision)
	ending    map[uint64]lockCause  // ended sessions with nodes left (session.go)

	// clock is the time of the last applied command, for NextTimer.
	clock atomic.Int64
}

// lockReq is one lock request. A phantom is a held request whose holder
// was lost while lock-delay applies: its node is gone, but it stays in
// the queues, granted, until delayEnd, blocking what it blocked.
type lockReq struct {
	rev     uint64
	node    string
	mode    namespace.LockMode
	session uint64
	holdTTL int64 // ms, 0: none
	delay   int64 // ms, resolved when requested

	granted   bool
	token     uint64
	grantTime int64
	deadline  int64 // hold deadline, unix ns; 0: none
	phantom   bool
	delayEnd  int64 // unix ns, for a phantom

	pending  bool
	hasTimer bool
	timer    setKey
	sidx     int    // position in bySession[session]
	reqID    string // the client's request id ("" when none)

	path    *lockPath
	qe, xe  *list.Element
	se, sxe []*list.Element // in path.sub, path.parent.sub, ... (subX likewise)
}

type lockPath struct {
	path     string
	parent   *lockPath
	children int

	queue, xqueue list.List // requests here, by revision
	sub, subX     list.List // requests here and below, by revision

	frontier *lockReq // first request here that is not runnable
	below    lockSet  // frontiers of the strict subtree, by revision
}

func newLockIndex() *lockIndex {
	return &lockIndex{
		paths:     map[string]*lockPath{},
		byNode:    map[string]*lockReq{},
		bySession: map[uint64][]*lockReq{},
		ownCounts: ownCounts{},
		byReqID:   map[reqIDKey]*lockReq{},
		ending:    map[uint64]lockCause{},
	}
}

// ownCounts counts each session's live requests by path: at a path, and
// strictly below it, all and exclusive ones. A session's own conflict is
// then found in O(depth).
type ownCounts map[ownKey]*ownCount

type ownKey struct {
	session uint64
	path    string
}

type ownCount struct{ at, atX, under, underX int }

// reqIDKey names a live request by its session and the client's request
// id (byReqID).
type reqIDKey struct {
	session uint64
	id      string
}

func (oc ownCounts) change(q *lockReq, d int) {
	x := 0
	if q.mode == namespace.LockExclusive {
		x = d
	}
	p := q.lockPath()
	oc.bump(ownKey{q.session, p}, func(c *ownCount) { c.at += d; c.atX += x })
	for p != "/" {
		p = namespace.Parent(p)
		oc.bump(ownKey{q.session, p}, func(c *ownCount) { c.under += d; c.underX += x })
	}
}

func (oc ownCounts) bump(k ownKey, f func(*ownCount)) {
	c := oc[k]
	if c == nil {
		c = &ownCount{}
		oc[k] = c
	}
	f(c)
	if *c == (ownCount{}) {
		delete(oc, k)
	}
}

// conflicts reports whether session has a live request that conflicts
// with a mode request on path: at path, below it or above it, unless both
// are shared.
func (oc ownCounts) conflicts(session uint64, path string, mode namespace.LockMode) bool {
	if c := oc[ownKey{session, path}]; c != nil {
		if mode == namespace.LockExclusive && (c.at > 0 || c.under > 0) || c.atX > 0 || c.underX > 0 {
			return true
		}
	}
	for p := path; p != "/"; {
		p = namespace.Parent(p)
		if c := oc[ownKey{session, p}]; c != nil && (mode == namespace.LockExclusive && c.at > 0 || c.atX > 0) {
			return true
		}
	}
	return false
}

func reqOf(e *list.Element) *lockReq {
	if e == nil {
		return nil
	}
	return e.Value.(*lockReq)
}

// lockPath returns the request's lock path: the parent of its node.
func (q *lockReq) lockPath() string { return namespace.Parent(q.node) }

func (q *lockReq) conflicts(path string, mode namespace.LockMode) bool {
	if q.mode == namespace.LockShared && mode == namespace.LockShared {
		return false
	}
	return related(q.lockPath(), path)
}

// related reports whether a and b are equal or one is an ancestor of the
// other.
func related(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	if a == b || a == "/" {
		return true
	}
	return len(b) > len(a) && b[:len(a)] == a && b[len(a)] == '/'
}

// pathFor returns the index node of p, creating it and its ancestors.
func (ix *lockIndex) pathFor(p string) *lockPath {
	if lp := ix.paths[p]; lp != nil {
		return lp
	}
	lp := &lockPath{path: p}
	if p != "/" {
		lp.parent = ix.pathFor(namespace.Parent(p))
		lp.parent.children++
	}
	ix.paths[p] = lp
	return lp
}

// prune drops index nodes left without requests below them.
func (ix *lockIndex) prune(lp *lockPath) {
	for lp != nil && lp.sub.Len() == 0 && lp.children == 0 {
		delete(ix.paths, lp.path)
		if lp.parent != nil {
			lp.parent.children--
		}
		lp = lp.parent
	}
}

// link appends q, which must be newer than every request in the index.
func (ix *lockIndex) link(q *lockReq) {
	lp := ix.pathFor(q.lockPath())
	q.path = lp
	q.qe = lp.queue.PushBack(q)
	levels := strings.Count(lp.path, "/") + 1
	if lp.path == "/" {
		levels = 1
	}
	if q.mode == namespace.LockExclusive {
		q.xe = lp.xqueue.PushBack(q)
		elems := make([]*list.Element, 0, 2*levels)
		q.se, q.sxe = elems[:0:levels], elems[levels:levels]
	} else {
		q.se = make([]*list.Element, 0, levels)
	}
	for a := lp; a != nil; a = a.parent {
		q.se = append(q.se, a.sub.PushBack(q))
		if q.mode == namespace.LockExclusive {
			q.sxe = append(q.sxe, a.subX.PushBack(q))
		}
	}
	if !q.phantom {
		ix.byNode[q.node] = q
		ix.sessionAdd(q)
	}
}

func (ix *lockIndex) unlink(q *lockReq) {
	lp := q.path
	lp.queue.Remove(q.qe)
	if q.xe != nil {
		lp.xqueue.Remove(q.xe)
	}
	i := 0
	for a := lp; a != nil; a = a.parent {
		a.sub.Remove(q.se[i])
		if q.mode == namespace.LockExclusive {
			a.subX.Remove(q.sxe[i])
		}
		i++
	}
	q.qe, q.xe, q.se, q.sxe = nil, nil, nil, nil
	if !q.phantom {
		delete(ix.byNode, q.node)
		ix.sessionDelete(q)
	}
}

func (ix *lockIndex) sessionAdd(q *lockReq) {
	ix.ownCounts.change(q, 1)
	if q.reqID != "" {
		ix.byReqID[reqIDKey{q.session, q.reqID}] = q
	}
	q.sidx = len(ix.bySession[q.session])
	ix.bySession[q.session] = append(ix.bySession[q.session], q)
}

// sessionDelete costs O(1): ending a session with 40,000 requests must not
// cost 40,000² (it stalled every client for seconds).
func (ix *lockIndex) sessionDelete(q *lockReq) {
	reqs := ix.bySession[q.session]
	if i := q.sidx; i < len(reqs) && reqs[i] == q {
		ix.ownCounts.change(q, -1)
		if q.reqID != "" {
			delete(ix.byReqID, reqIDKey{q.session, q.reqID})
		}
		last := len(reqs) - 1
		moved := reqs[last]
		reqs[i], moved.sidx = moved, i
		reqs[last] = nil
		reqs = reqs[:last]
	}
	if len(reqs) == 0 {
		delete(ix.bySession, q.session)
	} else {
		ix.bySession[q.session] = reqs
	}
}

// runnable reports whether no earlier conflicting request remains.
func (ix *lockIndex) runnable(q *lockReq) bool {
	lp := q.path
	if q.mode == namespace.LockExclusive {
		// Anything earlier here or below conflicts.
		if reqOf(lp.sub.Front()) != q {
			return false
		}
		for a := lp.parent; a != nil; a = a.parent {
			if h := reqOf(a.queue.Front()); h != nil && h.rev < q.rev {
				return false
			}
		}
		return true
	}
	if h := reqOf(lp.subX.Front()); h != nil && h.rev < q.rev {
		return false
	}
	for a := lp.parent; a != nil; a = a.parent {
		if h := reqOf(a.xqueue.Front()); h != nil && h.rev < q.rev {
			return false
		}
	}
	return true
}

// advance walks lp's queue from e, marking runnable requests pending, and
// makes the first blocked one the frontier.
func (ix *lockIndex) advance(lp *lockPath, e *list.Element) {
	for ; e != nil; e = e.Next() {
		q := reqOf(e)
		if q.granted || q.pending {
			continue // only when rebuilding: the runnable prefix
		}
		if !ix.runnable(q) {
			break
		}
		q.pending = true
		ix.pending.insert(revKey(q.rev), q)
	}
	ix.setFrontier(lp, reqOf(e))
}

func (ix *lockIndex) setFrontier(lp *lockPath, f *lockReq) {
	old := lp.frontier
	if old == f {
		return
	}
	for a := lp.parent; a != nil; a = a.parent {
		if old != nil {
			a.below.delete(revKey(old.rev))
		}
		if f != nil {
			a.below.insert(revKey(f.rev), f)
		}
	}
	lp.frontier = f
}

// wouldRun reports whether a new request (later than every other) for
// path in mode could run at once: no request on path or below conflicts,
// and none on an ancestor does. O(depth).
func (ix *lockIndex) wouldRun(path string, mode namespace.LockMode) bool {
	lp := ix.paths[path]
	p := path
	if lp != nil {
		if mode == namespace.LockExclusive && lp.sub.Len() > 0 || mode == namespace.LockShared && lp.subX.Len() > 0 {
			return false
		}
	} else {
		// The nearest ancestor the index knows: the ones above it hold
		// nothing either.
		for p != "/" && lp == nil {
			p = namespace.Parent(p)
			lp = ix.paths[p]
		}
		if lp == nil {
			return true
		}
		// lp is a strict ancestor: only its own queue conflicts.
		if mode == namespace.LockExclusive && lp.queue.Len() > 0 || mode == namespace.LockShared && lp.xqueue.Len() > 0 {
			return false
		}
	}
	for a := lp.parent; a != nil; a = a.parent {
		if mode == namespace.LockExclusive && a.queue.Len() > 0 || mode == namespace.LockShared && a.xqueue.Len() > 0 {
			return false
		}
	}
	return true
}

// add links a new request and decides whether it can run at once.
func (ix *lockIndex) add(q *lockReq) {
	ix.link(q)
	if q.path.frontier == nil {
		ix.advance(q.path, q.qe)
	}
	// Otherwise an earlier request at the same path is blocked, so q is.
}

// remove drops q and marks pending every request that can run because of
// it (see the type comment).
func (ix *lockIndex) remove(q *lockReq) {
	lp, r := q.path, q.rev
	if q.pending {
		ix.pending.delete(revKey(r))
		q.pending = false
	}
	ix.clearTimer(q)
	wasFrontier := lp.frontier == q
	next := q.qe.Next()
	ix.unlink(q)

	if wasFrontier {
		ix.advance(lp, next)
	} else if f := lp.frontier; f != nil && f.rev > r {
		ix.advance(lp, f.qe)
	}
	hi := uint64(math.MaxUint64)
	for a := lp; a != nil; a = a.parent {
		if a != lp {
			if f := a.frontier; f != nil && f.rev > r {
				ix.advance(a, f.qe)
			}
		}
		if x := reqOf(a.xqueue.Front()); x != nil {
			hi = min(hi, x.rev)
		}
	}
	var cands []*lockReq
	lp.below.ascend(revKey(r), func(k setKey, f *lockReq) bool {
		if k.a >= hi {
			return false
		}
		cands = append(cands, f)
		return true
	})
	for _, f := range cands {
		ix.advance(f.path, f.qe)
	}
	ix.prune(lp)
}

// grant gives q the lock at revision token.
func (ix *lockIndex) grant(q *lockReq, token uint64, now int64) {
	ix.pending.delete(revKey(q.rev))
	q.pending = false
	q.granted, q.token, q.grantTime = true, token, now
	if q.holdTTL > 0 {
		q.deadline = addMillis(now, q.holdTTL)
		ix.setTimer(q, q.deadline)
	}
}

// toPhantom keeps a lost holder in the queues until its lock-delay ends.
func (ix *lockIndex) toPhantom(q *lockReq, now int64) {
	delete(ix.byNode, q.node)
	ix.sessionDelete(q)
	q.phantom = true
	q.deadline = 0
	q.delayEnd = addMillis(now, q.delay)
	ix.setTimer(q, q.delayEnd)
}

func (ix *lockIndex) renew(q *lockReq, now int64) {
	q.deadline = addMillis(now, q.holdTTL)
	ix.setTimer(q, q.deadline)
}

func (ix *lockIndex) setTimer(q *lockReq, t int64) {
	ix.clearTimer(q)
	q.timer, q.hasTimer = timeKey(t, q.rev), true
	ix.timers.insert(q.timer, q)
}

func (ix *lockIndex) clearTimer(q *lockReq) {
	if q.hasTimer {
		ix.timers.delete(q.timer)
		q.hasTimer = false
	}
}

// addMillis returns t + ms milliseconds, saturating instead of wrapping.
func addMillis(t, ms int64) int64 {
	const perMs = 1_000_000
	if ms > (math.MaxInt64-max(t, 0))/perMs {
		return math.MaxInt64
	}
	return t + ms*perMs
}
