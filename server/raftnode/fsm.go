package raftnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/namespace/store"
	"github.com/latch-io/latch/server/clock"
)

// Observer is told about every batch the state machine applied, in log
// order, on the FSM goroutine: it must not block (hand work to its own
// goroutine). Entries skipped because they were applied before a restart are
// not reported. The results must not be modified.
type Observer interface {
	Applied(results []*namespace.Result)
}

// FSMConfig is what an FSM is made of. Only Store is required.
type FSMConfig struct {
	Store    *store.Store
	Observer Observer     // may be nil; SetObserver replaces it before raft starts
	Log      *slog.Logger // nil: slog.Default()
	// Clock learns every committed time (nil in tests of the FSM alone).
	Clock *clock.Cluster
	// HashView receives the results that carry a state view to hash
	// (OpHashCheck); nil releases them.
	HashView func(*namespace.Result)
	// WaitSpace blocks while the disk is full (DiskGuard.Wait); false
	// means the member is stopping. nil: no guard.
	WaitSpace func() bool
	// SpoolDir holds a snapshot while it is checked before a restore
	// ("" for the system's temporary directory).
	SpoolDir string
	// OwnLimits are this member's configured limits, compared with the
	// replicated settings whenever those change (a warning when they
	// differ).
	OwnLimits namespace.Limits
}

// FSM adapts store.Store to raft. It is deliberately thin: decoding and
// bookkeeping only, all semantics live in namespace.
type FSM struct {
	store    *store.Store
	observer Observer
	log      *slog.Logger

	// applied is the highest log index whose effects are visible in store:
	// commands and configuration entries delivered to ApplyBatch, or the
	// index a snapshot restored. It only advances; waiters use changed.
	mu       sync.Mutex
	applied  uint64
	changed  chan struct{} // closed and replaced whenever applied advances
	restores atomic.Uint64 // snapshot installs, for Status and tests
	// gen brackets each batch, observers included (the server's client
	// cache: a leader read of a cached node knows whether it may have seen
	// a write whose invalidation is not queued yet).
	gen ApplyGen
	// decodeErrors counts entries applied as no-ops because they did not
	// decode, for metrics.
	decodeErrors atomic.Uint64

	// The parts of FSMConfig; limitsRev is the settings revision last
	// compared with ownLimits.
	ownLimits namespace.Limits
	limitsRev uint64
	clock     *clock.Cluster
	hashView  func(*namespace.Result)
	waitSpace func() bool
	spoolDir  string
}

var (
	_ raft.FSM         = (*FSM)(nil)
	_ raft.BatchingFSM = (*FSM)(nil)
)

// NewFSM returns the state machine over cfg.Store, which resumes from the
// store's applied index, and warns when the replicated settings differ
// from cfg.OwnLimits.
func NewFSM(cfg FSMConfig) *FSM {
	f := &FSM{
		store: cfg.Store, observer: cfg.Observer, log: cfg.Log, clock: cfg.Clock,
		hashView: cfg.HashView, waitSpace: cfg.WaitSpace, spoolDir: cfg.SpoolDir,
		ownLimits: cfg.OwnLimits, limitsRev: cfg.Store.LimitsRevision(),
		applied: cfg.Store.AppliedIndex(), changed: make(chan struct{}),
	}
	if f.log == nil {
		f.log = slog.Default()
	}
	NoteLimits(f.store, f.ownLimits, f.log)
	return f
}

// SetObserver replaces the observer of applied batches; call it before
// raft starts.
func (f *FSM) SetObserver(o Observer) { f.observer = o }

// AppliedIndex is the index of the last entry the namespace applied (the
// watch hub's watch.Log).
func (f *FSM) AppliedIndex() uint64 { return f.store.AppliedIndex() }

// Restores counts the snapshots installed on this member: each one breaks
// the history of events and replaces the sessions.
func (f *FSM) Restores() uint64 { return f.restores.Load() }

// DecodeErrors counts the entries applied as no-ops because they did not
// decode.
func (f *FSM) DecodeErrors() uint64 { return f.decodeErrors.Load() }

// Gen is the FSM's apply generation (applygen.go).
func (f *FSM) Gen() *ApplyGen { return &f.gen }

// Apply applies one log; raft calls ApplyBatch instead, this is for the
// interface.
func (f *FSM) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies the command logs of a batch in one namespace batch and
// returns one *namespace.Result per command log (nil for other types).
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	f.gen.begin()
	defer f.gen.end()
	out := make([]any, len(logs))
	entries := make([]namespace.BatchEntry, 0, len(logs))
	slots := make([]int, 0, len(logs))
	var decodeErrs map[int]error
	for i, l := range logs {
		if l.Type != raft.LogCommand {
			continue
		}
		e, err := namespace.DecodeEntry(l.Data)
		if err != nil {
			// Record the index with a no-op so the namespace still advances
			// past it, and report the decode error as this entry's result.
			// The no-op (stamped with time 0: the clock stays) may still
			// grant locks left over from a full batch; see below.
			if decodeErrs == nil {
				decodeErrs = map[int]error{}
			}
			decodeErrs[len(entries)] = err
			e = &namespace.Entry{Cmd: namespace.Command{Op: namespace.OpNoop}}
		}
		entries = append(entries, namespace.BatchEntry{Index: l.Index, Time: e.Time, Cmd: &e.Cmd})
		slots = append(slots, i)
	}
	var results []*namespace.Result
	if len(entries) > 0 && f.waitSpace != nil && !f.waitSpace() {
		// Stopping with a full disk: apply nothing (a restart replays).
		for j, slot := range slots {
			out[slot] = &namespace.Result{Index: entries[j].Index, Err: namespace.ErrClosed}
		}
		return out
	}
	if len(entries) > 0 {
		results = f.store.ApplyBatch(entries)
		if len(results) != len(entries) {
			// A namespace bug; raft would panic on a short response slice.
			err := fmt.Errorf("%w: namespace returned %d results for %d entries", ErrBadResponse, len(results), len(entries))
			for j, slot := range slots {
				out[slot] = &namespace.Result{Index: entries[j].Index, Err: err}
			}
			results = nil
		}
	}
	fresh := results[:0:0]
	for j, r := range results {
		out[slots[j]] = r
		if err, ok := decodeErrs[j]; ok && r != nil && !errors.Is(r.Err, namespace.ErrAlreadyApplied) {
			// The proposer hears of the decode error; observers get what
			// the no-op did, since its grants and events happened on every
			// member and waiters must learn of them.
			f.log.Error("raft log entry does not decode; applied as a no-op", "index", entries[j].Index, "err", err)
			f.decodeErrors.Add(1)
			out[slots[j]] = &namespace.Result{Index: r.Index, Err: err, Events: r.Events, Grants: r.Grants}
		}
		if r != nil && !errors.Is(r.Err, namespace.ErrAlreadyApplied) {
			fresh = append(fresh, r)
		}
		if r != nil && r.HashView != nil {
			if f.hashView != nil {
				f.hashView(r)
			} else {
				r.HashView.Release()
			}
		}
	}
	if f.clock != nil && len(entries) > 0 {
		f.clock.Observe(f.store.Clock())
	}
	if len(logs) > 0 && f.store.Err() == nil {
		// A store that met a storage error applied none of the batch:
		// nothing waiting for these indexes may be told otherwise.
		f.advance(logs[len(logs)-1].Index)
	}
	f.checkLimits()
	if f.observer != nil && len(fresh) > 0 {
		f.observer.Applied(fresh)
	}
	return out
}

// checkLimits logs a change of the replicated settings, and whether this
// member's configuration disagrees with them.
func (f *FSM) checkLimits() {
	rev := f.store.LimitsRevision()
	if rev == f.limitsRev {
		return
	}
	f.limitsRev = rev
	f.log.Info("cluster settings in force", "revision", rev, "limits", fmt.Sprintf("%+v", f.store.Limits()))
	NoteLimits(f.store, f.ownLimits, f.log)
}

// NoteLimits logs the settings in force when they came from the log and
// this member's configuration (own) says otherwise, so an operator sees
// that a changed flag had no effect.
func NoteLimits(s *store.Store, own namespace.Limits, log interface{ Warn(string, ...any) }) {
	rev := s.LimitsRevision()
	if rev == 0 {
		return
	}
	if in := s.Limits(); in != own {
		log.Warn("this member's limit flags differ from the replicated cluster settings and are ignored; change the settings with PUT /v1/limits",
			"revision", rev, "cluster", fmt.Sprintf("%+v", in), "flags", fmt.Sprintf("%+v", own))
	}
}

func (f *FSM) advance(index uint64) {
	f.mu.Lock()
	if index > f.applied {
		f.applied = index
		close(f.changed)
		f.changed = make(chan struct{})
	}
	f.mu.Unlock()
}

// Applied returns the applied index and a channel closed when it next
// advances.
func (f *FSM) Applied() (uint64, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied, f.changed
}

// WaitApplied blocks until the applied index reaches index, ctx ends or
// stop closes (the member is closing: nothing will be applied any more;
// ErrClosed then).
func (f *FSM) WaitApplied(ctx context.Context, stop <-chan struct{}, index uint64) error {
	for {
		applied, changed := f.Applied()
		if applied >= index {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return ErrClosed
		}
	}
}

// Snapshot captures the namespace at one read timestamp after syncing it,
// so the durable state is never behind the snapshot raft records.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	if err := f.store.Sync(); err != nil {
		return nil, fmt.Errorf("latch: sync before snapshot: %w", err)
	}
	snap, err := f.store.Snapshot()
	if err != nil {
		return nil, err
	}
	return &fsmSnapshot{snap: snap}, nil
}

// Restore replaces the namespace with a snapshot sent by the leader (or a
// user restore).
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	// Checked whole before the store drops its state (snapshotcheck.go).
	snap, err := spoolSnapshot(rc, f.spoolDir)
	if err != nil {
		f.log.Error("snapshot install refused", "err", err)
		return err
	}
	defer snap.Close()
	f.gen.begin()
	defer f.gen.end()
	if err := f.store.Restore(snap); err != nil {
		return err
	}
	f.restores.Add(1)
	f.checkLimits()
	if f.clock != nil {
		f.clock.Observe(f.store.Clock())
	}
	// The restored index may be below what was applied before (a user
	// restore of an old snapshot); reset rather than advance.
	f.mu.Lock()
	f.applied = f.store.AppliedIndex()
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
	return nil
}

type fsmSnapshot struct{ snap *store.Snapshot }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.snap.WriteTo(sink); err != nil {
		sink.Cancel()
		return fmt.Errorf("latch: write snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() { s.snap.Release() }
