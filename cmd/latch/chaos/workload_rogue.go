package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/session"
)

// Rogue operations, as recorded in the rogue worker's history. Each is an
// attack that must be refused: an OutcomeOK one is an unauthorized change.
const (
	OpRogueDelete   = "rogue-delete"    // delete another session's lock or election node
	OpRogueSet      = "rogue-set"       // overwrite another session's lock or election node
	OpRogueMulti    = "rogue-multi"     // the same delete inside a multi
	OpRoguePoison   = "rogue-poison"    // create a lock request name under a lock path
	OpRogueLockName = "rogue-lock-name" // lock a path that is a lock request name
	OpRogueLockRoot = "rogue-lock-root" // lock /, which blocks every lock
	OpRogueCellMap  = "rogue-cellmap"   // write the cell map (an admin's)
	// Over the HTTP API: renew or release an implicit lease held by
	// another client with what its queue shows (client_id, fencing_token)
	// and a guessed lease token.
	OpRogueHTTPRenew   = "rogue-http-renew"
	OpRogueHTTPRelease = "rogue-http-release"
)

// runRogue runs the rogue worker: it has no rights over the other
// workers' nodes (they belong to their sessions, and it is no admin), and
// keeps trying to delete, overwrite and steal their locks and election
// nodes, to lock / and to plant reserved names, to write the cell map,
// and (with --api) to take over an HTTP implicit lease, recording each
// attempt.
func (w *worker) runRogue(ctx context.Context) error {
	targets := append(append([]string(nil), lockPaths...), ElectionPath)
	for ctx.Err() == nil {
		path := targets[w.rng.IntN(len(targets))]
		var err error
		switch w.rng.IntN(8) {
		case 0, 1:
			err = w.rogueOnHolder(ctx, path, OpRogueDelete, func(octx context.Context, node string) error {
				return w.c.Delete(octx, node)
			})
		case 2:
			err = w.rogueOnHolder(ctx, path, OpRogueSet, func(octx context.Context, node string) error {
				_, err := w.c.Set(octx, node, []byte("rogue "+w.id))
				return err
			})
		case 3:
			err = w.rogueOnHolder(ctx, path, OpRogueMulti, func(octx context.Context, node string) error {
				_, err := w.c.Multi(octx, client.OpDelete(node))
				return err
			})
		case 4:
			name := fmt.Sprintf("%s/lock-x-%010d", path, w.rng.IntN(1000))
			err = w.rogueAttempt(ctx, OpRoguePoison, name, func(octx context.Context) error {
				_, err := w.c.Create(octx, name, []byte("rogue"))
				return err
			})
			if err == nil {
				err = w.rogueAttempt(ctx, OpRogueLockName, name, func(octx context.Context) error {
					return w.rogueLock(octx, name)
				})
			}
		case 5:
			err = w.rogueAttempt(ctx, OpRogueLockRoot, "/", func(octx context.Context) error {
				return w.rogueLock(octx, "/")
			})
		case 6:
			node := client.CellMapNode(session.CellOf(RootPath))
			err = w.rogueAttempt(ctx, OpRogueCellMap, node, func(octx context.Context) error {
				evil := client.CellMap{session.CellOf(RootPath): {"127.0.0.1:1"}}.Encode()
				_, err := w.c.Set(octx, node, evil)
				if errors.Is(err, client.ErrNoNode) {
					_, err = w.c.Create(octx, node, evil)
				}
				return err
			})
		default:
			if w.http != nil {
				err = w.rogueHTTPTakeover(ctx)
			}
		}
		if errors.Is(err, errHistory) {
			return err
		}
		w.pace(ctx, 100)
	}
	return ctx.Err()
}

// rogueLock tries to take the lock at path and, should that ever work,
// lets it go at once (the attempt is recorded as a success all the same).
func (w *worker) rogueLock(ctx context.Context, path string) error {
	m := client.NewMutex(w.s, path)
	if err := m.TryLock(ctx); err != nil {
		return err
	}
	_ = m.Unlock(ctx)
	return nil
}

// rogueOnHolder attacks the granted request node of another session on
// path, if there is one.
func (w *worker) rogueOnHolder(ctx context.Context, path, op string, attack func(context.Context, string) error) error {
	qctx, cancel := context.WithTimeout(ctx, opTimeout)
	q, err := w.c.LockQueue(qctx, path)
	cancel()
	if err != nil {
		return nil // no target this time
	}
	for _, li := range q {
		if li.Granted && !li.Phantom && li.Session != w.s.ID() && strings.HasPrefix(li.Node, path+"/") {
			return w.rogueAttempt(ctx, op, li.Node, func(octx context.Context) error { return attack(octx, li.Node) })
		}
	}
	return nil
}

// rogueAttempt records one attack: ok when it worked (a violation),
// unknown when its outcome is, fail when it was refused. It returns
// errHistory when the history cannot be written, nil when the attack
// failed, and a non-nil error otherwise (so a caller can stop chaining).
func (w *worker) rogueAttempt(ctx context.Context, op, path string, attack func(context.Context) error) error {
	id, err := w.h.Invoke(op, Args{Key: path}, 0, w.s.ID())
	if err != nil {
		return fmt.Errorf("%w: %v", errHistory, err)
	}
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	aerr := attack(octx)
	cancel()
	outcome := OutcomeFail
	switch {
	case aerr == nil:
		outcome = OutcomeOK
		w.log.Warn("rogue attack succeeded", "op", op, "path", path)
	case errors.Is(aerr, client.ErrUnknownOutcome), errors.Is(aerr, errHTTPUnknown), ctx.Err() != nil:
		outcome = OutcomeUnknown
	}
	if err := w.h.Complete(id, outcome, Result{}, 0, 0, aerr); err != nil {
		return fmt.Errorf("%w: %v", errHistory, err)
	}
	if outcome == OutcomeFail {
		return nil
	}
	return errRogueNotRefused
}

// errRogueNotRefused ends a chain of attacks whose first step was not
// refused.
var errRogueNotRefused = errors.New("chaos: rogue attack not refused")
