package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/latch-io/latch/namespace"
)

// Counter is a shared 64-bit counter held in one node, like Curator's
// SharedCount and DistributedAtomicLong: Add and CompareAndSet are
// read-modify-writes with a version check (a Set with WithVersion), retried
// when another writer came first, so no increment is ever lost or applied
// twice.
//
// A write whose answer was lost (a leader change, ErrUnknownOutcome) is
// resolved, not guessed: each Add or CompareAndSet call names its write
// with a random id, and the node keeps the ids of its last
// counterWindow writes next to the value. After a lost answer the
// counter is read again: the id is there (the write was applied; its
// value is returned), or the versions moved past the write's expected
// version without it (it can never apply: it is retried on the new
// value), or the version has not moved (the write may still be in
// flight; the retry expects the same version, so at most one of the two
// applies). Only when more than counterWindow other writes went by
// before the counter could be read again is the outcome unknown, and
// the call fails with ErrUnknownOutcome.
//
// The node's data is JSON: {"value": N, "writes": [{"version": V, "id":
// ID, "value": N}, ...]}; a node that is missing counts as 0 and is
// created (with its missing ancestors) by the first write. Deleting the
// node of a counter in use resets it; do not.
type Counter struct {
	c    *Client
	path string
}

// counterWindow is how many writes a counter node remembers.
const counterWindow = 32

// NewCounter returns the counter at path.
func NewCounter(c *Client, path string) *Counter { return &Counter{c: c, path: path} }

// counterData is a counter node's data.
type counterData struct {
	Value  int64          `json:"value"`
	Writes []counterWrite `json:"writes,omitempty"`
}

// counterWrite is one remembered write: the version it made, its id and
// the value it wrote.
type counterWrite struct {
	Version int64  `json:"version"`
	ID      string `json:"id"`
	Value   int64  `json:"value"`
}

// Get returns the counter's value (0 when its node does not exist).
func (k *Counter) Get(ctx context.Context) (int64, error) {
	d, _, _, err := k.read(ctx)
	return d.Value, err
}

// Add adds delta to the counter and returns the value it wrote.
func (k *Counter) Add(ctx context.Context, delta int64) (int64, error) {
	v, _, err := k.update(ctx, func(cur int64) (int64, bool) { return cur + delta, true })
	return v, err
}

// CompareAndSet sets the counter to next if it holds old, and reports
// whether it did.
func (k *Counter) CompareAndSet(ctx context.Context, old, next int64) (bool, error) {
	_, ok, err := k.update(ctx, func(cur int64) (int64, bool) { return next, cur == old })
	return ok, err
}

// read returns the node's counter, its version (-1: no node) and whether
// it exists.
func (k *Counter) read(ctx context.Context) (counterData, int64, bool, error) {
	var d counterData
	data, st, err := k.c.Get(ctx, k.path)
	if errors.Is(err, ErrNoNode) {
		return d, -1, false, nil
	}
	if err != nil {
		return d, 0, false, err
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return d, 0, false, fmt.Errorf("%w: %s holds no counter: %v", ErrNotCounter, k.path, err)
	}
	return d, st.Version, true, nil
}

// update writes f(value) until it applies (true), f declines (false) or
// the call fails. See Counter for how lost answers are resolved.
func (k *Counter) update(ctx context.Context, f func(cur int64) (int64, bool)) (int64, bool, error) {
	id := newRequestID()
	var unknown []int64 // expected versions of writes whose answer was lost
	// fail returns err, saying that a write may have applied when one
	// whose answer was lost is not resolved.
	fail := func(err error) (int64, bool, error) {
		if len(unknown) > 0 && !errors.Is(err, ErrUnknownOutcome) {
			err = fmt.Errorf("%w: counter %s: a write's answer was lost, then: %w", ErrUnknownOutcome, k.path, err)
		}
		return 0, false, err
	}
	for {
		d, ver, exists, err := k.read(ctx)
		if err != nil {
			return fail(err)
		}
		w, still, err := d.resolve(ver, id, unknown)
		if err != nil {
			return 0, false, fmt.Errorf("%w: counter %s", err, k.path)
		}
		if w != nil {
			return w.Value, true, nil // an earlier attempt applied
		}
		unknown = still
		next, ok := f(d.Value)
		if !ok {
			return d.Value, false, nil
		}
		nd := counterData{Value: next, Writes: append(d.Writes, counterWrite{Version: ver + 1, ID: id, Value: next})}
		if len(nd.Writes) > counterWindow {
			nd.Writes = nd.Writes[len(nd.Writes)-counterWindow:]
		}
		data, err := json.Marshal(nd)
		if err != nil {
			return fail(err)
		}
		if !exists {
			if err = createPath(ctx, k.c, namespace.Parent(k.path)); err == nil {
				_, err = k.c.Create(ctx, k.path, data)
			}
		} else {
			_, err = k.c.Set(ctx, k.path, data, WithVersion(ver))
		}
		switch {
		case err == nil:
			return next, true, nil
		case errors.Is(err, ErrBadVersion), errors.Is(err, ErrNodeExists), errors.Is(err, ErrNoNode):
			// Another writer came first: read again.
		case errors.Is(err, ErrUnknownOutcome), ctx.Err() != nil:
			// A write whose ctx ended after it was sent may have applied
			// too.
			unknown = append(unknown, ver)
		default:
			return fail(err)
		}
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
	}
}

// resolve decides what became of the writes of id whose answers were lost,
// which expected the versions unknown, now that the node is at version ver
// (-1: no node) holding d: the write that applied, or the writes that may
// still apply (they expect a version the node has not passed), or
// ErrUnknownOutcome when the node passed a write's version and no longer
// remembers who made it.
func (d *counterData) resolve(ver int64, id string, unknown []int64) (*counterWrite, []int64, error) {
	for i := range d.Writes {
		if d.Writes[i].ID == id {
			return &d.Writes[i], nil, nil
		}
	}
	var still []int64
	for _, e := range unknown {
		switch {
		case ver <= e:
			still = append(still, e) // may still be in flight
		case len(d.Writes) == 0 || d.Writes[0].Version > e+1:
			return nil, nil, fmt.Errorf("%w: a write's answer was lost and %d writes went by since", ErrUnknownOutcome, ver-e)
		}
		// Else the node remembers who made version e+1, and it was not
		// this write: it can never apply.
	}
	return nil, still, nil
}
