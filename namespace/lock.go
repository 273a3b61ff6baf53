package namespace

import (
	"errors"
	"fmt"
)

// LockMode is how a request wants its lock: exclusive (the zero value) or
// shared.
type LockMode uint8

// Lock modes.
const (
	LockExclusive LockMode = iota
	LockShared
)

func (m LockMode) String() string {
	switch m {
	case LockExclusive:
		return "exclusive"
	case LockShared:
		return "shared"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// NoLockDelay in Command.LockDelayMillis asks for no lock-delay at all
// (0 means the Limits default).
const NoLockDelay int64 = -1

// maxLockMillis bounds hold TTLs and lock-delays (about 34 years), so that
// deadlines in unix nanoseconds cannot overflow.
const maxLockMillis = 1 << 40

// lockWorkBytes bounds the writes one command spends on lock timers and,
// separately, on grants, next to MaxLockBatch: a batch of locks on paths
// with large node data must still fit one badger transaction.
const lockWorkBytes = 256 << 10

// Grant is one lock granted by a command.
type Grant struct {
	Node    string // the request node
	Path    string // the locked path
	Session uint64
	Token   uint64 // fencing token: the revision of the granting command
	Mode    LockMode
}

// LockInfo describes one lock request.
type LockInfo struct {
	Node            string // request node; for a phantom, the deleted node's path
	Path            string // the locked path
	Mode            LockMode
	Session         uint64
	Rev             uint64 // revision that created the request: the queue order
	HoldTTLMillis   int64  // 0: held until released
	LockDelayMillis int64  // the lock-delay that applies when the holder is lost
	Granted         bool
	Token           uint64 // fencing token, when granted
	GrantTime       int64  // leader time of the grant, unix ns
	Deadline        int64  // hold deadline, unix ns; 0: none
	// Phantom: the holder was lost and lock-delay keeps the lock
	// unavailable until DelayEnd (unix ns); the node is gone.
	Phantom  bool
	DelayEnd int64
}

func (q *lockReq) info() LockInfo {
	return LockInfo{
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
func (c *cmdCtx) lockRequest(cmd *Command, r *Result) error {
	l := c.limits()
	switch {
	case cmd.Mode != LockExclusive && cmd.Mode != LockShared:
		return fmt.Errorf("%w: lock mode %d", ErrBadCommand, cmd.Mode)
	case cmd.HoldTTLMillis < 0 || cmd.HoldTTLMillis > maxLockMillis:
		return fmt.Errorf("%w: hold TTL %dms", ErrBadCommand, cmd.HoldTTLMillis)
	case cmd.LockDelayMillis < NoLockDelay:
		return fmt.Errorf("%w: lock-delay %dms", ErrBadCommand, cmd.LockDelayMillis)
	}
	if err := ValidatePath(cmd.Path, l); err != nil {
		return err
	}
	if t := c.b.acl; t.enforced {
		switch {
		case hasReservedComponent(cmd.Path):
			return reservedError(cmd.Path)
		case cmd.Path == "/":
			// A lock on / blocks every lock in the tree: only an admin of
			// the whole tree may take it.
			if err := t.check(c.identity, "/", PermAdmin); err != nil {
				return err
			}
		}
		// A lock covers its subtree (it blocks every lock below it), so
		// it needs the right to lock all of it: a rule that carves a part
		// out of the caller's rights refuses the lock on the whole.
		if err := t.checkSubtree(c.identity, cmd.Path, PermCreate); err != nil {
			return err
		}
	}
	if _, ok, err := c.getRaw(sessionKey(cmd.Session)); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%w: %d", ErrNoSession, cmd.Session)
	}
	ix := c.locks()
	if cmd.RequestID != "" {
		if len(cmd.RequestID) > maxRequestIDBytes {
			return fmt.Errorf("%w: lock request id of %d bytes, max %d", ErrBadCommand, len(cmd.RequestID), maxRequestIDBytes)
		}
		if q := ix.byReqID[reqIDKey{cmd.Session, cmd.RequestID}]; q != nil {
			if q.lockPath() != cmd.Path || q.mode != cmd.Mode {
				return fmt.Errorf("%w: %q is %s (%s), not a %s lock on %s", ErrBadRequestID, cmd.RequestID, q.node, q.mode, cmd.Mode, cmd.Path)
			}
			// A retry: the request stands, in its place in the queue.
			r.Path, r.Stat.CreateRev = q.node, q.rev
			return nil
		}
	}
	if max := l.MaxLockRequestsPerSession; max > 0 && len(ix.bySession[cmd.Session]) >= max {
		return fmt.Errorf("%w: session %d has %d", ErrTooManyLockRequests, cmd.Session, len(ix.bySession[cmd.Session]))
	}
	if own := ix.ownConflict(cmd.Session, cmd.Path, cmd.Mode); own != nil {
		return fmt.Errorf("%w: %s lock on %s conflicts with %s (%s)",
			ErrWouldDeadlock, cmd.Mode, cmd.Path, own.node, own.mode)
	}
	if cmd.Try && !ix.wouldRun(cmd.Path, cmd.Mode) {
		return fmt.Errorf("%w: %s (%s lock not granted at once; nothing queued)", ErrLocked, cmd.Path, cmd.Mode)
	}
	// Missing ancestors first, top down; create refuses an ephemeral
	// parent, so a request node (or anything under one) cannot be locked.
	var missing []string
	for p := cmd.Path; p != "/"; p = Parent(p) {
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
		if err := c.create(&Command{Op: OpCreate, Path: missing[i]}, &Result{}); err != nil {
			return err
		}
	}
	prefix := "lock-x-"
	if cmd.Mode == LockShared {
		prefix = "lock-s-"
	}
	node := &Command{Op: OpCreate, Path: Join(cmd.Path, prefix), Flags: FlagEphemeral | FlagSequential,
		Session: cmd.Session, Data: cmd.Data}
	if err := c.createNode(node, r, true); err != nil {
		return err
	}
	delay := cmd.LockDelayMillis
	switch {
	case delay == NoLockDelay:
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
func (ix *lockIndex) ownConflict(session uint64, path string, mode LockMode) *lockReq {
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
func (c *cmdCtx) ownedRequest(cmd *Command) (*lockReq, error) {
	if err := ValidatePath(cmd.Path, c.limits()); err != nil {
		return nil, err
	}
	q := c.locks().byNode[cmd.Path]
	if q == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoLock, cmd.Path)
	}
	if q.session != cmd.Session {
		return nil, fmt.Errorf("%w: %s is session %d's, not %d's", ErrNotLockOwner, cmd.Path, q.session, cmd.Session)
	}
	return q, nil
}

// lockCancel removes the request, waiting or held: the client gave up.
func (c *cmdCtx) lockCancel(cmd *Command) error {
	q, err := c.ownedRequest(cmd)
	if err != nil {
		return err
	}
	if cmd.Withdrawn {
		return c.removeLockNode(q, causeCancel)
	}
	return c.removeLockNode(q, causeRelease)
}

func (c *cmdCtx) lockRelease(cmd *Command) error {
	q, err := c.ownedRequest(cmd)
	if err != nil {
		return err
	}
	if !q.granted {
		return fmt.Errorf("%w: %s is waiting", ErrLockNotHeld, cmd.Path)
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
func (c *cmdCtx) lockRenew(cmd *Command) error {
	q, err := c.ownedRequest(cmd)
	if err != nil {
		return err
	}
	switch {
	case cmd.HoldTTLMillis < 0 || cmd.HoldTTLMillis > maxLockMillis:
		return fmt.Errorf("%w: hold TTL %dms", ErrBadCommand, cmd.HoldTTLMillis)
	case cmd.TTLMillis < 0 || cmd.TTLMillis > maxLockMillis:
		return fmt.Errorf("%w: session TTL %dms", ErrBadCommand, cmd.TTLMillis)
	case !q.granted:
		return fmt.Errorf("%w: %s is waiting", ErrLockNotHeld, cmd.Path)
	case q.holdTTL != 0 && q.deadline <= c.now:
		return fmt.Errorf("%w: %s: hold TTL ran out at %d", ErrLockNotHeld, cmd.Path, q.deadline)
	}
	if cmd.TTLMillis != 0 {
		v, ok, err := c.getRaw(sessionKey(cmd.Session))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: %d", ErrNoSession, cmd.Session)
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
		return fmt.Errorf("%w: lock request %d has no node %s", ErrStorage, q.rev, q.node)
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
		t := EventLockLost
		switch c.lockCause {
		case causeRelease, causeCancel, causeClose:
			t = EventLockReleased
		}
		c.events = append(c.events, Event{Type: t, Path: p, Rev: c.index, Session: q.session,
			Lock: &LockNote{Token: q.token, Mode: q.mode, Cause: lockEndNames[c.lockCause]}})
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
func (c *cmdCtx) finishLocks(r *Result) {
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
			c.events = append(c.events, Event{Type: EventLockGranted, Path: q.node, Rev: c.index, Session: q.session,
				Lock: &LockNote{Token: q.token, Mode: q.mode}})
			c.tellWaiting(q)
			r.Grants = append(r.Grants, Grant{Node: q.node, Path: q.lockPath(), Session: q.session, Token: q.token, Mode: q.mode})
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
