package namespace

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	badger "github.com/dgraph-io/badger/v4"
)

// Config configures a Store.
type Config struct {
	// Dir is the badger directory; created when missing. Required unless
	// InMemory.
	Dir string
	// Limits bound commands; the zero value means DefaultLimits(). Every
	// member of a cluster must use the same limits.
	Limits Limits
	// InMemory keeps everything in memory; for tests only.
	InMemory bool
	// Logger receives badger's warnings and errors; nil silences badger.
	Logger *slog.Logger
}

// Store is the namespace state machine over one badger database. Apply,
// ApplyBatch and Restore must be called from one goroutine at a time (the
// raft FSM); reads may run concurrently with them.
type Store struct {
	db     *badger.DB
	limits Limits
	log    *slog.Logger

	mu      sync.Mutex // serializes writers: apply, restore, close
	applied atomic.Uint64
	clock   int64 // monotonic leader clock; guarded by mu
	broken  error // set when a commit failed; guarded by mu
}

// Result is what one applied command produced.
type Result struct {
	Index   uint64   // the revision (raft index) the command was applied at
	Err     error    // nil, or wraps a sentinel; nothing changed when Err != nil
	Path    string   // created path, with the sequential suffix filled in
	Stat    Stat     // stat of the node after create/set, or checked by OpCheck
	Session uint64   // OpSessionOpen: the new session's id (= Index)
	Results []Result // OpMulti: one per op; OpSessionExpire: one per session
	Events  []Event  // in order; empty when Err != nil
}

// BatchEntry is one raft log entry handed to ApplyBatch.
type BatchEntry struct {
	Index uint64
	Time  int64
	Cmd   *Command
}

// Open opens or creates the store and resumes from its recorded applied
// index.
func Open(cfg Config) (*Store, error) {
	return nil, errors.New("latch: not implemented")
}

// Close closes the database. The store must not be used afterwards.
func (s *Store) Close() error { return nil }

// Apply applies one command at raft index index with leader time
// leaderTime. An index at or below AppliedIndex is skipped with
// ErrAlreadyApplied, so a restart never applies an entry twice.
func (s *Store) Apply(index uint64, leaderTime int64, cmd *Command) *Result {
	return s.ApplyBatch([]BatchEntry{{Index: index, Time: leaderTime, Cmd: cmd}})[0]
}

// ApplyBatch applies consecutive entries in as few badger transactions as
// fit (usually one), each writing the applied index with the effects. It
// returns one Result per entry.
func (s *Store) ApplyBatch(entries []BatchEntry) []*Result { return nil }

// AppliedIndex is the index of the last applied entry.
func (s *Store) AppliedIndex() uint64 { return s.applied.Load() }

// Sync makes every applied entry durable; call it before a snapshot.
func (s *Store) Sync() error { return s.db.Sync() }
