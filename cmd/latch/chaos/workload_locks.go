package chaos

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/latch-io/latch/client"
)

// acquireTimeout bounds one lock wait: long enough to queue behind a few
// holders and a lock-delay, short enough to keep workers moving.
const acquireTimeout = 10 * time.Second

// maxDeadlocks is how many ErrWouldDeadlock in a row make a worker give up
// its session: a request it could not withdraw is still queued.
const maxDeadlocks = 3

// errStuck ends a workload whose session holds state it cannot clean up.
var errStuck = errors.New("latch: chaos: session holds a lock request the worker cannot withdraw")

// heldLock is what the workload needs of a held Mutex or RWMutex.
type heldLock interface {
	Token() uint64
	Lost() <-chan struct{}
}

// lockTarget is one lock round's choice.
type lockTarget struct {
	path string
	mode string
}

func (w *worker) pickLock() lockTarget {
	t := lockTarget{path: lockPaths[w.rng.IntN(len(lockPaths))], mode: ModeExclusive}
	if w.rng.IntN(4) == 0 {
		t.mode = ModeShared
	}
	return t
}

// runLocks runs the locks workload: take a lock, then for every counter
// key it covers read the value through fencedstore with the lock's token
// and (exclusive holders) write it plus one, hold a moment, release.
// Every step checks Lost() first and abandons the lock once it fired.
func (w *worker) runLocks(ctx context.Context) error {
	// Exclusive holds use a Mutex or an RWMutex in turn, shared ones an
	// RWMutex, so both recipes are exercised.
	mutexes, rws := map[string]*client.Mutex{}, map[string]*client.RWMutex{}
	for _, p := range lockPaths {
		mutexes[p] = client.NewMutex(w.s, p, client.WithLockDelay(w.delay))
		rws[p] = client.NewRWMutex(w.s, p, client.WithLockDelay(w.delay))
	}
	var prevToken uint64 // the ignore-tokens bug writes with it
	deadlocks := 0       // ErrWouldDeadlock in a row
	for ctx.Err() == nil {
		t := w.pickLock()
		if w.bug == BugSkipLock {
			if err := w.skipLockRound(ctx, t.path); errors.Is(err, errHistory) {
				return err
			}
			w.pace(ctx, 20)
			continue
		}
		var m heldLock
		var lock, unlock func(context.Context) error
		switch rw := rws[t.path]; {
		case t.mode == ModeShared:
			m, lock, unlock = rw, rw.RLock, rw.RUnlock
		case w.rng.IntN(2) == 0:
			m, lock, unlock = rw, rw.Lock, rw.Unlock
		default:
			mu := mutexes[t.path]
			m, lock, unlock = mu, mu.Lock, mu.Unlock
		}
		id, err := w.h.Invoke(OpAcquire, Args{Key: t.path, Mode: t.mode}, 0, w.s.ID())
		if err != nil {
			return err
		}
		actx, cancel := context.WithTimeout(ctx, acquireTimeout)
		err = lock(actx)
		cancel()
		if err != nil {
			// Not granted to us, as far as we know: the client withdraws
			// a request it gave up on.
			if herr := w.h.Complete(id, OutcomeFail, Result{}, 0, 0, err); herr != nil {
				return herr
			}
			if errors.Is(err, client.ErrWouldDeadlock) {
				// The session still holds or waits for a lock this worker
				// could not release or withdraw; it ends the session.
				if deadlocks++; deadlocks >= maxDeadlocks {
					return errStuck
				}
			}
			w.pace(ctx, 50)
			continue
		}
		deadlocks = 0
		token := m.Token()
		if err := w.h.Complete(id, OutcomeOK, Result{}, token, 0, nil); err != nil {
			return err
		}
		useToken := token
		if w.bug == BugIgnoreTokens && prevToken != 0 && w.rng.IntN(2) == 0 {
			useToken = prevToken // a stale token: only a store that ignores tokens accepts it
		}
		if err := w.critical(ctx, t, m, token, useToken); errors.Is(err, errHistory) {
			return err
		}
		prevToken = token
		if err := w.release(t, token, unlock); err != nil {
			return err
		}
		w.pace(ctx, 30)
	}
	return ctx.Err()
}

// lost reports (recording it once) whether the held lock's Lost() fired.
func (w *worker) lost(l heldLock, token uint64, recorded *bool) bool {
	select {
	case <-l.Lost():
	default:
		return false
	}
	if !*recorded {
		*recorded = true
		if err := w.h.Event(EvLockLost, Result{}, token, w.s.ID()); err != nil {
			w.log.Warn("record lost", "err", err)
		}
	}
	return true
}

// critical is the holder's work on the counters its lock covers, with
// useToken as the fencing token. The use-after-lost bug keeps going after
// Lost() (recording that it saw it) and holds long, in many rounds, so a
// worker pause lands inside a hold; its store calls outlive the session.
func (w *worker) critical(ctx context.Context, t lockTarget, l heldLock, token, useToken uint64) error {
	keys := keysUnder(t.path)
	rounds, hold := 1, 60
	storeCtx := ctx
	if w.bug == BugUseAfterLost {
		rounds, hold, storeCtx = 30, 0, w.stop
	}
	recorded := false
	for r := 0; r < rounds && storeCtx.Err() == nil; r++ {
		for _, k := range keys {
			if w.lost(l, token, &recorded) && w.bug != BugUseAfterLost {
				return nil
			}
			rec, err := w.storeOp(storeCtx, "read", k, useToken, "")
			if errors.Is(err, errHistory) {
				return err
			}
			if err != nil || t.mode == ModeShared {
				continue
			}
			if w.lost(l, token, &recorded) && w.bug != BugUseAfterLost {
				return nil
			}
			v, _ := strconv.Atoi(rec.Data)
			if _, err := w.storeOp(storeCtx, "write", k, useToken, strconv.Itoa(v+1)); errors.Is(err, errHistory) {
				return err
			}
		}
		if w.bug == BugUseAfterLost {
			sleepCtx(storeCtx, 100*time.Millisecond)
		}
	}
	w.pace(ctx, hold)
	w.lost(l, token, &recorded)
	return nil
}

// skipLockRound is the skip-lock bug: the worker behaves as if it held an
// exclusive lock on path, borrowing the newest token the store has seen
// (learned from its refusals), and increments the counters anyway. It
// records the acquire it believes in, so the checker can name both
// holders.
func (w *worker) skipLockRound(ctx context.Context, path string) error {
	keys := keysUnder(path)
	probe, err := w.storeOp(ctx, "read", keys[0], w.borrowed, "")
	if errors.Is(err, errHistory) {
		return err
	}
	w.borrowed = max(w.borrowed, probe.Highest)
	id, err := w.h.Invoke(OpAcquire, Args{Key: path, Mode: ModeExclusive, Value: "skip-lock: not acquired"}, 0, w.s.ID())
	if err != nil {
		return err
	}
	if err := w.h.Complete(id, OutcomeOK, Result{}, w.borrowed, 0, nil); err != nil {
		return err
	}
	for _, k := range keys {
		rec, err := w.storeOp(ctx, "read", k, w.borrowed, "")
		if errors.Is(err, errHistory) {
			return err
		}
		if err != nil {
			w.borrowed = max(w.borrowed, rec.Highest)
			continue
		}
		v, _ := strconv.Atoi(rec.Data)
		w.pace(ctx, 5) // the window a real holder's read-modify-write falls into
		if _, err := w.storeOp(ctx, "write", k, w.borrowed, strconv.Itoa(v+1)); errors.Is(err, errHistory) {
			return err
		}
	}
	return nil
}

// release unlocks, retrying while the answer is unknown (a release that
// was applied answers ErrNotHeld the second time, which the recipe counts
// as released). A lock lost meanwhile needs no release.
func (w *worker) release(t lockTarget, token uint64, unlock func(context.Context) error) error {
	op := OpRelease
	if t.path == ElectionPath {
		op = OpResign
	}
	rid, err := w.h.Invoke(op, Args{Key: t.path, Mode: t.mode}, token, w.s.ID())
	if err != nil {
		return err
	}
	deadline := time.Now().Add(3 * opTimeout)
	for {
		uctx, cancel := context.WithTimeout(w.stop, opTimeout)
		err = unlock(uctx)
		cancel()
		if err == nil || errors.Is(err, client.ErrLockLost) || errors.Is(err, client.ErrNotHeld) || w.s.Err() != nil {
			break
		}
		if time.Now().After(deadline) || w.stop.Err() != nil {
			w.h.Complete(rid, OutcomeUnknown, Result{}, 0, 0, err)
			return errStuck
		}
		sleepCtx(w.stop, 100*time.Millisecond)
	}
	outcome := OutcomeOK
	if err != nil {
		outcome = OutcomeFail // lost before the release: nothing to release
	}
	return w.h.Complete(rid, outcome, Result{}, 0, 0, err)
}
