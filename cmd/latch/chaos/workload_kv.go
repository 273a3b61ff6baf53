package chaos

import (
	"context"
	"errors"
	"fmt"

	"github.com/latch-io/latch/client"
)

// runKV runs the kv workload: create, set (at the version last read, or
// unconditionally), get, delete and two txns (compare-and-set on the value
// last read; create if absent, else read) on a few keys, each write with a
// value no other write uses, so the checker can tell writes apart.
func (w *worker) runKV(ctx context.Context) error {
	versions := map[string]int64{} // last version this worker read per key
	values := map[string]string{}  // last value this worker read or wrote per key
	n := 0
	for ctx.Err() == nil {
		key := kvKeys[w.rng.IntN(len(kvKeys))]
		version, known := versions[key]
		if !known || w.rng.IntN(4) == 0 {
			version = AnyVersion
		}
		n++
		value := fmt.Sprintf("%s-%d", w.id, n)
		var err error
		switch p := w.rng.IntN(100); {
		case p < 35:
			var res Result
			res, err = kvGet(ctx, w.c, w.h, key)
			if err == nil {
				if res.Exists {
					versions[key], values[key] = res.Version, res.Value
				} else {
					delete(versions, key)
				}
			}
		case p < 60:
			err = kvWrite(ctx, w.h, OpKVSet, Args{Key: key, Value: value, Version: version}, func(ctx context.Context) (Result, error) {
				st, err := w.c.Set(ctx, key, []byte(value), client.WithVersion(version))
				if err == nil {
					versions[key], values[key] = st.Version, value
				}
				return Result{Version: st.Version}, err
			})
		case p < 68:
			expect := values[key]
			err = kvWrite(ctx, w.h, OpKVTxnCAS, Args{Key: key, Value: value, Expect: expect}, func(ctx context.Context) (Result, error) {
				resp, err := w.c.Txn().If(client.Compare(client.Value(key), "=", expect)).
					Then(client.OpSet(key, []byte(value))).Commit(ctx)
				if err != nil {
					return Result{}, err
				}
				res := Result{Succeeded: resp.Succeeded}
				if resp.Succeeded {
					res.Version = resp.Results[0].Stat.Version
					versions[key], values[key] = res.Version, value
				}
				return res, nil
			})
		case p < 76:
			err = kvWrite(ctx, w.h, OpKVTxnCreate, Args{Key: key, Value: value}, func(ctx context.Context) (Result, error) {
				resp, err := w.c.Txn().If(client.NodeAbsent(key)).
					Then(client.OpCreate(key, []byte(value))).Else(client.OpGet(key)).Commit(ctx)
				if err != nil {
					return Result{}, err
				}
				res := Result{Succeeded: resp.Succeeded}
				if resp.Succeeded {
					versions[key], values[key] = 0, value
				} else {
					r := resp.Results[0]
					res.Value, res.Version = string(r.Data), r.Stat.Version
					versions[key], values[key] = res.Version, res.Value
				}
				return res, nil
			})
		case p < 86:
			err = kvWrite(ctx, w.h, OpKVCreate, Args{Key: key, Value: value}, func(ctx context.Context) (Result, error) {
				_, err := w.c.Create(ctx, key, []byte(value))
				if err == nil {
					versions[key], values[key] = 0, value
				}
				return Result{}, err
			})
		default:
			err = kvWrite(ctx, w.h, OpKVDelete, Args{Key: key, Version: version}, func(ctx context.Context) (Result, error) {
				return Result{}, w.c.Delete(ctx, key, client.WithVersion(version))
			})
		}
		if errors.Is(err, errHistory) {
			return err
		}
		w.pace(ctx, 10)
	}
	return ctx.Err()
}

// errHistory wraps a failure to record: the worker must stop, since it
// can no longer prove what it did.
var errHistory = errors.New("latch: chaos: history write failed")

// kvStatus maps a definite namespace refusal to its status, "" otherwise.
func kvStatus(err error) string {
	switch {
	case errors.Is(err, client.ErrNoNode):
		return StatusNoNode
	case errors.Is(err, client.ErrNodeExists):
		return StatusExists
	case errors.Is(err, client.ErrBadVersion):
		return StatusBadVersion
	}
	return ""
}

// kvGet reads key linearizably and records it. A missing node is a
// successful read of "absent"; any other error fails the read (reads
// change nothing, so the checker drops failed ones).
func kvGet(ctx context.Context, c *client.Client, h *History, key string) (Result, error) {
	id, err := h.Invoke(OpKVGet, Args{Key: key}, 0, 0)
	if err != nil {
		return Result{}, fmt.Errorf("%w: %v", errHistory, err)
	}
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	data, st, err := c.Get(octx, key)
	cancel()
	res, outcome := Result{}, OutcomeOK
	switch {
	case err == nil:
		res = Result{Exists: true, Value: string(data), Version: st.Version}
	case errors.Is(err, client.ErrNoNode):
		err = nil
	default:
		outcome = OutcomeFail
	}
	if herr := h.Complete(id, outcome, res, 0, 0, err); herr != nil {
		return res, fmt.Errorf("%w: %v", errHistory, herr)
	}
	return res, err
}

// kvWrite records one write around do: ok, fail with a definite status, or
// unknown (the connection broke, a timeout, anything that may have been
// applied).
func kvWrite(ctx context.Context, h *History, op string, args Args, do func(context.Context) (Result, error)) error {
	id, err := h.Invoke(op, args, 0, 0)
	if err != nil {
		return fmt.Errorf("%w: %v", errHistory, err)
	}
	octx, cancel := context.WithTimeout(ctx, opTimeout)
	res, err := do(octx)
	cancel()
	outcome := OutcomeOK
	if err != nil {
		outcome = OutcomeUnknown
		if st := kvStatus(err); st != "" {
			outcome, res = OutcomeFail, Result{Status: st}
		}
	}
	if herr := h.Complete(id, outcome, res, 0, 0, err); herr != nil {
		return fmt.Errorf("%w: %v", errHistory, herr)
	}
	return err
}
