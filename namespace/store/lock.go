package store

import (
	"errors"
	"fmt"

	"github.com/latch-io/latch/namespace"
)

// lockWorkBytes bounds the writes one command spends on lock timers and,
// separately, on grants, next to MaxLockBatch: a batch of locks on paths
// with large node data must still fit one badger transaction.
const lockWorkBytes = 256 << 10

func (q *lockReq) info() namespace.LockInfo {
	return namespace.LockInfo{
		Node: q.node, Path: q.lockPath(), Mode: q.mode, Session: q.session, Rev: q.rev,
		HoldTTLMillis: q.holdTTL, LockDelayMillis: q.delay,
		Granted: q.granted, Token: q.token, GrantTime: q.grantTime, Deadline: q.deadline,
		Phantom: q.phantom, DelayEnd: q.delayEnd,
	}
}

// lockCause says why a request node went away.
type lockCause uint8

const (
	causeDelete  lockCause = iota // OpDelete of the node (the zero value: plain removeNode)
	causeRelease                  // OpLockRelease or OpLockCancel
	causeClose                    // the session closed
	causeExpire                   // the session expired
	causeHoldTTL                  // the hold deadline passed
	causeCancel                   // OpLockCancel
)

// lockOpKind is a change to the lock index that a command queues; the
// changes apply when the command succeeds (or at a checkpoint), so a
// failed command leaves the index untouched.
type lockOpKind uint8

const (
	lockAdd lockOpKind = iota
	lockRemove
	lockToPhantom
	lockRenew
)

type lockOp struct {
	kind lockOpKind
	req  *lockReq
	ttl  int64 // lockRenew: the new hold TTL (ms), 0: unchanged
}

func (c *cmdCtx) locks() *lockIndex { return c.b.s.locks }

// maxRequestIDBytes bounds a lock request id (it is stored with the
// request).
const maxRequestIDBytes = 64

// lockRequest queues a request: it creates the lock path and its missing
// ancestors as persistent nodes, then the request node
// Path/lock-x-NNNNNNNNNN (lock-s- when shared), ephemeral and owned by the
// session, holding cmd.Data.
func (c *cmdCtx) lockRequest(cmd *namespace.Command, r *namespace.Result) error {
	l := c.limits()
	switch {
	case cmd.Mode != namespace.LockExclusive && cmd.Mode != namespace.LockShared:
		return fmt.Errorf("%w: lock mode %d", namespace.ErrBadCommand, cmd.Mode)
	case cmd.HoldTTLMillis < 0 || cmd.HoldTTLMillis > namespace.MaxLockMillis:
		return fmt.Errorf("%w: hold TTL %dms", namespace.ErrBadCommand, cmd.HoldTTLMillis)
	case cmd.LockDelayMillis < namespace.NoLockDelay:
		return fmt.Errorf("%w: lock-delay %dms", namespace.ErrBadCommand, cmd.LockDelayMillis)
	}
	if err := namespace.ValidatePath(cmd.Path, l); err != nil {
		return err
	}
	if t := c.b.acl; t.enforced {
		switch {
		case hasReservedComponent(cmd.Path):
			return reservedError(cmd.Path)
		case cmd.Path == "/":
			// A lock on / blocks every lock in the tree: only an admin of
			// the whole tree may take it.
			if err := t.check(c.identity, "/", namespace.PermAdmin); err != nil {
				return err
			}
		}
		// A lock covers its subtree (it blocks every lock below it), so
		// it needs the right to lock all of it: a rule that carves a part
		// out of the caller's rights refuses the lock on the whole.
		if err := t.checkSubtree(c.identity, cmd.Path, namespace.PermCreate); err != nil {
			return err
		}
	}
	if _, ok, err := c.getRaw(sessionKey(cmd.Session)); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%w: %d", namespace.ErrNoSession, cmd.Session)
	}
	ix := c.locks()
	if cmd.RequestID != "" {
		if len(cmd.RequestID) > maxRequestIDBytes {
			return fmt.Errorf("%w: lock request id of %d bytes, max %d", namespace.ErrBadCommand, len(cmd.RequestID), maxRequestIDBytes)
		}
		if q := ix.byReqID[reqIDKey{cmd.Session, cmd.RequestID}]; q != nil {
			if q.lockPath() != cmd.Path || q.mode != cmd.Mode {
				return fmt.Errorf("%w: %q is %s (%s), not a %s lock on %s", namespace.ErrBadRequestID, cmd.RequestID, q.node, q.mode, cmd.Mode, cmd.Path)
			}
			// A retry: the request stands, in its place in the queue.
			r.Path, r.Stat.CreateRev = q.node, q.rev
			return nil
		}
	}
	if max := l.MaxLockRequestsPerSession; max > 0 && len(ix.bySession[cmd.Session]) >= max {
		return fmt.Errorf("%w: session %d has %d", namespace.ErrTooManyLockRequests, cmd.Session, len(ix.bySession[cmd.Session]))
	}
	if own := ix.ownConflict(cmd.Session, cmd.Path, cmd.Mode); own != nil {
		return fmt.Errorf("%w: %s lock on %s conflicts with %s (%s)",
			namespace.ErrWouldDeadlock, cmd.Mode, cmd.Path, own.node, own.mode)
	}
	if cmd.Try && !ix.wouldRun(cmd.Path, cmd.Mode) {
		return fmt.Errorf("%w: %s (%s lock not granted at once; nothing queued)", namespace.ErrLocked, cmd.Path, cmd.Mode)
	}
	// Missing ancestors first, top down; create refuses an ephemeral
	// parent, so a request node (or anything under one) cannot be locked.
	var missing []string
	for p := cmd.Path; p != "/"; p = namespace.Parent(p) {
		n, err := c.node(p)
		if err != nil {
			return err
		}
		if n != nil {
			break
		}
		missing = append(missing, p)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := c.create(&namespace.Command{Op: namespace.OpCreate, Path: missing[i]}, &namespace.Result{}); err != nil {
			return err
		}
	}
	prefix := "lock-x-"
	if cmd.Mode == namespace.LockShared {
		prefix = "lock-s-"
	}
	node := &namespace.Command{Op: namespace.OpCreate, Path: namespace.Join(cmd.Path, prefix), Flags: namespace.FlagEphemeral | namespace.FlagSequential,
		Session: cmd.Session, Data: cmd.Data}
	if err := c.createNode(node, r, true); err != nil {
		return err
	}
	delay := cmd.LockDelayMillis
	switch {
	case delay == namespace.NoLockDelay:
		delay = 0
	case delay == 0:
		delay = l.DefaultLockDelayMillis
	}
	q := &lockReq{
		rev: c.index, node: r.Path, mode: cmd.Mode, session: cmd.Session,
		holdTTL: cmd.HoldTTLMillis, delay: min(delay, l.MaxLockDelayMillis), reqID: cmd.RequestID,
	}
	c.lockOps = append(c.lockOps, lockOp{kind: lockAdd, req: q})
	c.queued = append(c.queued, q)
	if cmd.Try {
		c.tryReq = q
	}
	return nil
}

// ownConflict returns the earliest live request of session that conflicts
// with a mode request on path, or nil. Finding none (the common case)
// costs O(depth), whatever the session's other requests: a session with
// 40,000 requests made each new one slower. Naming the conflict costs
// O(the session's requests), once, for the error.
func (ix *lockIndex) ownConflict(session uint64, path string, mode namespace.LockMode) *lockReq {
	if !ix.ownCounts.conflicts(session, path, mode) {
		return nil
	}
	var found *lockReq
	for _, q := range ix.bySession[session] {
		if q.conflicts(path, mode) && (found == nil || q.rev < found.rev) {
			found = q
		}
	}
	return found
}

// ownedRequest finds the live request at node that session owns.
func (c *cmdCtx) ownedRequest(cmd *namespace.Command) (*lockReq, error) {
	if err := namespace.ValidatePath(cmd.Path, c.limits()); err != nil {
		return nil, err
	}
	q := c.locks().byNode[cmd.Path]
	if q == nil {
		return nil, fmt.Errorf("%w: %s", namespace.ErrNoLock, cmd.Path)
	}
	if q.session != cmd.Session {
		return nil, fmt.Errorf("%w: %s is session %d's, not %d's", namespace.ErrNotLockOwner, cmd.Path, q.session, cmd.Session)
	}
	return q, nil
}

// lockCancel removes the request, waiting or held: the client gave up.
func (c *cmdCtx) lockCancel(cmd *namespace.Command) error {
	q, err := c.ownedRequest(cmd)
	if err != nil {
		return err
	}
	if cmd.Withdrawn {
		return c.removeLockNode(q, causeCancel)
	}
	return c.removeLockNode(q, causeRelease)
}

func (c *cmdCtx) lockRelease(cmd *namespace.Command) error {
	q, err := c.ownedRequest(cmd)
	if err != nil {
		return err
	}
	if !q.granted {
		return fmt.Errorf("%w: %s is waiting", namespace.ErrLockNotHeld, cmd.Path)
	}
	return c.removeLockNode(q, causeRelease)
}

// lockRenew restarts the hold TTL from now. A lock without a hold TTL has
// nothing to renew, and renewing it succeeds; one whose deadline passed is
// lost, even before the tick that removes it. HoldTTLMillis, when set,
// replaces the hold TTL before it restarts (a lock without one gets
// one); TTLMillis, when set, replaces the TTL of the owning session (the
// leader checked it against its session bounds and restarts the lease):
// a lease-per-lock client changes both in one command.
func (c *cmdCtx) lockRenew(cmd *namespace.Command) error {
	q, err := c.ownedRequest(cmd)
	if err != nil {
		return err
	}
	switch {
	case cmd.HoldTTLMillis < 0 || cmd.HoldTTLMillis > namespace.MaxLockMillis:
		return fmt.Errorf("%w: hold TTL %dms", namespace.ErrBadCommand, cmd.HoldTTLMillis)
	case cmd.TTLMillis < 0 || cmd.TTLMillis > namespace.MaxLockMillis:
		return fmt.Errorf("%w: session TTL %dms", namespace.ErrBadCommand, cmd.TTLMillis)
	case !q.granted:
		return fmt.Errorf("%w: %s is waiting", namespace.ErrLockNotHeld, cmd.Path)
	case q.holdTTL != 0 && q.deadline <= c.now:
		return fmt.Errorf("%w: %s: hold TTL ran out at %d", namespace.ErrLockNotHeld, cmd.Path, q.deadline)
	}
	if cmd.TTLMillis != 0 {
		v, ok, err := c.getRaw(sessionKey(cmd.Session))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: %d", namespace.ErrNoSession, cmd.Session)
		}
		si, err := decodeSession(cmd.Session, v)
		if err != nil {
			return err
		}
		si.TTLMillis = cmd.TTLMillis
		c.putRaw(sessionKey(cmd.Session), appendSession(nil, &si))
	}
	if q.holdTTL == 0 && cmd.HoldTTLMillis == 0 {
		return nil
	}
	c.lockOps = append(c.lockOps, lockOp{kind: lockRenew, req: q, ttl: cmd.HoldTTLMillis})
	return nil
}

// removeLockNode deletes a live request's node; removeNode queues the
// request's removal.
func (c *cmdCtx) removeLockNode(q *lockReq, cause lockCause) error {
	n, err := c.node(q.node)
	if err != nil {
		return err
	}
	if n == nil {
		return fmt.Errorf("%w: lock request %d has no node %s", namespace.ErrStorage, q.rev, q.node)
	}
	c.lockCause = cause
	defer func() { c.lockCause = causeDelete }()
	return c.removeNode(q.node, n)
}

// lockNodeRemoved is removeNode's hook: when the node was a live lock
// request, it reports what the holder loses and queues the request's
// removal, or its turn into a phantom when lock-delay applies.
func (c *cmdCtx) lockNodeRemoved(p string) {
	q := c.locks().byNode[p]
	if q == nil {
		return
	}
	kind := lockRemove
	if q.granted {
		c.historyErr = errors.Join(c.historyErr, c.recordLock(q, lockEndNames[c.lockCause]))
		t := namespace.EventLockLost
		switch c.lockCause {
		case causeRelease, causeCancel, causeClose:
			t = namespace.EventLockReleased
		}
		c.events = append(c.events, namespace.Event{Type: t, Path: p, Rev: c.index, Session: q.session,
			Lock: &namespace.LockNote{Token: q.token, Mode: q.mode, Cause: lockEndNames[c.lockCause]}})
		if (c.lockCause == causeExpire || c.lockCause == causeHoldTTL) && q.delay > 0 {
			kind = lockToPhantom
		}
	}
	c.lockOps = append(c.lockOps, lockOp{kind: kind, req: q})
}

// fireLockTimers is the tick's lock work: holds whose deadline passed are
// lost (lock-delay applies) and phantoms whose delay ended go away, in
// time order, at most MaxLockBatch of them and about lockWorkBytes of
// writes (a tick never checkpoints, so its own writes are all it counts).
func (c *cmdCtx) fireLockTimers() error {
	ix := c.locks()
	var due []*lockReq
	phantomBytes := int64(0) // a phantom's removal writes only when ops apply
	ix.timers.ascend(setKey{}, func(k setKey, q *lockReq) bool {
		if keyTime(k) > c.now || len(due) == c.limits().MaxLockBatch {
			return false
		}
		due = append(due, q)
		return true
	})
	for _, q := range due {
		if c.bytes+phantomBytes >= lockWorkBytes {
			break
		}
		if q.phantom {
			c.lockOps = append(c.lockOps, lockOp{kind: lockRemove, req: q})
			phantomBytes += 25
			continue
		}
		if err := c.removeLockNode(q, causeHoldTTL); err != nil {
			return err
		}
	}
	return nil
}

// applyLockOps applies the queued changes to the index and their records
// to the overlay.
func (c *cmdCtx) applyLockOps() {
	if len(c.lockOps) == 0 && len(c.endingOps) == 0 {
		return
	}
	ix := c.locks()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	c.applyEndingOps(ix)
	for _, op := range c.lockOps {
		q := op.req
		switch op.kind {
		case lockAdd:
			ix.add(q)
			c.putRaw(lockKey(q.rev), appendLockRecord(nil, q))
		case lockRemove:
			ix.remove(q)
			c.deleteRaw(lockKey(q.rev))
		case lockToPhantom:
			ix.toPhantom(q, c.now)
			c.putRaw(lockKey(q.rev), appendLockRecord(nil, q))
		case lockRenew:
			if op.ttl != 0 {
				q.holdTTL = op.ttl
			}
			ix.renew(q, c.now)
			c.putRaw(lockKey(q.rev), appendLockRecord(nil, q))
		}
	}
	c.lockOps = c.lockOps[:0]
}

// finishLocks runs after a command succeeded: it applies the queued lock
// changes and grants pending requests in revision order, at most
// MaxLockBatch and about lockWorkBytes of records. Every successful command
// grants, so leftovers go out with the next one (NextTimer asks for it).
func (c *cmdCtx) finishLocks(r *namespace.Result) {
	ix := c.locks()
	c.applyLockOps()
	if ix.pending.len() > 0 {
		ix.mu.Lock()
		spent := 0
		grant := func(q *lockReq) {
			ix.grant(q, c.index, c.now)
			c.historyErr = errors.Join(c.historyErr, c.recordLock(q, "granted"))
			rec := appendLockRecord(nil, q)
			c.putRaw(lockKey(q.rev), rec)
			spent += len(rec) + 25
			c.events = append(c.events, namespace.Event{Type: namespace.EventLockGranted, Path: q.node, Rev: c.index, Session: q.session,
				Lock: &namespace.LockNote{Token: q.token, Mode: q.mode}})
			c.tellWaiting(q)
			r.Grants = append(r.Grants, namespace.Grant{Node: q.node, Path: q.lockPath(), Session: q.session, Token: q.token, Mode: q.mode})
		}
		// A try-lock is runnable (checked when requested) and granted
		// now: it conflicts with none of the earlier pending requests.
		n := 0
		if q := c.tryReq; q != nil && q.pending {
			grant(q)
			n++
		}
		for ; n < c.limits().MaxLockBatch && spent < lockWorkBytes; n++ {
			_, q, ok := ix.pending.min()
			if !ok {
				break
			}
			grant(q)
		}
		ix.mu.Unlock()
	}
	c.tellContended()
	ix.clock.Store(c.now)
}
