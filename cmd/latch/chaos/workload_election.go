package chaos

import (
	"context"
	"errors"
	"strconv"

	"github.com/latch-io/latch/client"
)

// leadership adapts an Election to heldLock: its term is its token.
type leadership struct{ *client.Election }

func (l leadership) Token() uint64 { return l.Term() }

// runElection runs the election workload: campaign with the worker's id;
// once leading, write the term to fencedstore's election key with the
// term as fencing token, lead a moment, resign.
func (w *worker) runElection(ctx context.Context) error {
	e := leadership{client.NewElection(w.s, ElectionPath, client.WithLockDelay(w.delay))}
	deadlocks := 0
	for ctx.Err() == nil {
		id, err := w.h.Invoke(OpCampaign, Args{Key: ElectionPath, Value: w.id}, 0, w.s.ID())
		if err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, acquireTimeout)
		err = e.Campaign(cctx, []byte(w.id))
		cancel()
		if err != nil {
			if herr := w.h.Complete(id, OutcomeFail, Result{}, 0, 0, err); herr != nil {
				return herr
			}
			if errors.Is(err, client.ErrWouldDeadlock) {
				if deadlocks++; deadlocks >= maxDeadlocks {
					return errStuck
				}
			}
			w.pace(ctx, 50)
			continue
		}
		deadlocks = 0
		term := e.Term()
		if err := w.h.Complete(id, OutcomeOK, Result{Value: w.id}, term, 0, nil); err != nil {
			return err
		}
		recorded := false
		if !w.lost(e, term, &recorded) {
			if _, err := w.storeOp(ctx, "write", ElectionKey, term, strconv.FormatUint(term, 10)); errors.Is(err, errHistory) {
				return err
			}
		}
		w.pace(ctx, 300)
		w.lost(e, term, &recorded)
		if err := w.release(lockTarget{path: ElectionPath, mode: ModeExclusive}, term, e.Resign); err != nil {
			return err
		}
		w.pace(ctx, 50)
	}
	return ctx.Err()
}
