package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"

	"github.com/latch-io/latch/namespace"
)

// Config configures a Store.
type Config struct {
	// Dir is the badger directory; created when missing. Required unless
	// InMemory.
	Dir string
	// Limits are the settings a store enforces until a command sets them
	// (OpSetLimits); the zero value means DefaultLimits(). A replicated
	// store must leave it zero: every member has to start from the same
	// settings, and the cluster changes them only through the log.
	Limits namespace.Limits
	// InMemory keeps everything in memory; for tests only.
	InMemory bool
	// Logger receives badger's warnings and errors; nil silences badger.
	Logger *slog.Logger
}

// Validate rejects a config Open cannot use.
func (c Config) Validate() error {
	if c.Dir == "" && !c.InMemory {
		return fmt.Errorf("%w: Dir is required unless InMemory", namespace.ErrBadConfig)
	}
	if c.Limits != (namespace.Limits{}) {
		if err := c.Limits.Validate(); err != nil {
			return fmt.Errorf("%w: Limits: %w", namespace.ErrBadConfig, err)
		}
	}
	return nil
}

// Store is the namespace state machine over one badger database. Apply,
// ApplyBatch and Restore must be called from one goroutine at a time (the
// raft FSM); reads may run concurrently with them.
type Store struct {
	db *badger.DB
	// initLimits are Config.Limits, in force while no command has set
	// the settings; limits are the settings in force as of the last
	// committed batch (settings.go).
	initLimits namespace.Limits
	limits     atomic.Pointer[limitsInForce]

	// Transaction budget, half of what badger accepts, so that estimates
	// never trip ErrTxnTooBig halfway through a command's writes.
	maxTxnCount, maxTxnBytes int64
	valueThreshold           int64

	// gate is held shared by every read and snapshot stream, and
	// exclusively by Restore and Close: badger may panic on reads during
	// DropAll or after Close.
	gate sync.RWMutex
	// generation counts restores, so a snapshot taken before one refuses
	// to stream the replaced state.
	generation atomic.Uint64

	mu      sync.Mutex    // serializes writers: apply, restore, close
	applied atomic.Uint64 // last committed applied index
	clock   int64         // last committed leader clock; guarded by mu
	broken  error         // set when a commit failed; guarded by mu
	// faultErr is the first storage error met (integrity.go); failed is
	// closed then.
	faultMu  sync.Mutex
	faultErr error
	failed   chan struct{}
	closed   atomic.Bool

	// locks is derived from the lock records; replaced by Restore (under
	// mu and gate), so readers reach it under gate.
	locks *lockIndex

	// acl is the rule table as of the last committed batch (acl.go);
	// ApplyBatch works on the batch's own copy and publishes it on commit.
	acl atomic.Pointer[aclTable]

	// cache holds records as badger has them, for the apply path
	// (readcache.go); guarded by mu.
	cache *readCache

	// afterCheckpoint, when set by a test, runs after each checkpoint
	// commit; an error simulates a crash right there.
	afterCheckpoint func() error
}

// not synced.
const (
	memTableSize   = 16 << 20
	valueThreshold = 4 << 10 // larger node data goes to the value log
)

// Open opens or creates the store and resumes from its recorded applied
// index.
func Open(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	limits := cfg.Limits
	if limits == (namespace.Limits{}) {
		limits = namespace.DefaultLimits()
	}
	opts := badger.DefaultOptions(cfg.Dir).
		WithInMemory(cfg.InMemory).
		WithSyncWrites(false).
		WithDetectConflicts(false). // one writer: conflicts cannot happen
		WithMemTableSize(memTableSize).
		WithNumMemtables(2).
		WithNumLevelZeroTables(3).
		WithNumLevelZeroTablesStall(8).
		WithBlockCacheSize(16 << 20).
		WithIndexCacheSize(8 << 20).
		WithValueLogFileSize(64 << 20).
		WithValueThreshold(valueThreshold).
		WithNumCompactors(2).
		WithCompression(options.None).
		// Every table is verified whole when opened (at Open, and after
		// each compaction writes one). Not OnTableAndBlockRead: badger
		// v4.9 panics (nil block in VerifyChecksum's error path) when a
		// table fails verification in that mode.
		WithChecksumVerificationMode(options.OnTableRead).
		WithVerifyValueChecksum(true).
		WithMetricsEnabled(false).
		WithLogger(nil)
	if cfg.InMemory {
		opts.Dir, opts.ValueDir = "", ""
	}
	if cfg.Logger != nil {
		opts = opts.WithLogger(badgerLogger{cfg.Logger}).WithLoggingLevel(badger.WARNING)
	}
	db, err := badger.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("%w: open %s: %w", namespace.ErrStorage, cfg.Dir, err)
	}
	maxBatch := memTableSize * 15 / 100 // badger's own limit per txn
	s := &Store{
		db:             db,
		initLimits:     limits,
		maxTxnBytes:    int64(maxBatch / 2),
		maxTxnCount:    int64(maxBatch / 96 / 2), // 96: badger's skiplist node size
		valueThreshold: valueThreshold,
		failed:         make(chan struct{}),
		cache:          newReadCache(),
	}
	// verify first: nothing is loaded from a store that fails its checksums.
	err = s.verify()
	if err == nil {
		err = s.loadState()
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// loadState reads what the store keeps in memory from badger: the meta
// keys, the settings, the lock index and the ACL table. Open and Restore
// both call it, so the two cannot disagree on what is derived.
func (s *Store) loadState() error {
	for _, load := range []func() error{s.loadMeta, s.loadLimits, s.loadLocks, s.loadACL} {
		if err := load(); err != nil {
			return err
		}
	}
	return nil
}

// loadMeta creates the root on a fresh database and reads the applied index
// and clock into memory.
func (s *Store) loadMeta() error {
	err := s.db.Update(func(txn *badger.Txn) error {
		if _, err := txn.Get(nodeKey("/")); err == nil {
			return nil
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		if err := txn.Set(nodeKey("/"), appendNode(nil, &node{})); err != nil {
			return err
		}
		if err := txn.Set(metaApplied, binary.BigEndian.AppendUint64(nil, 0)); err != nil {
			return err
		}
		return txn.Set(metaClock, binary.BigEndian.AppendUint64(nil, 0))
	})
	if err != nil {
		return fmt.Errorf("%w: init: %w", namespace.ErrStorage, err)
	}
	var applied uint64
	var clock int64
	err = s.db.View(func(txn *badger.Txn) error {
		a, err := readUint64(txn, metaApplied)
		if err != nil {
			return err
		}
		c, err := readUint64(txn, metaClock)
		applied, clock = a, int64(c)
		return err
	})
	if err != nil {
		return fmt.Errorf("%w: read meta: %w", namespace.ErrStorage, err)
	}
	s.applied.Store(applied)
	s.clock = clock
	return nil
}

func readUint64(txn *badger.Txn, key []byte) (uint64, error) {
	item, err := txn.Get(key)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", key, err)
	}
	var v uint64
	err = itemValue(item, func(b []byte) error {
		if len(b) != 8 {
			return fmt.Errorf("%s: %d bytes", key, len(b))
		}
		v = binary.BigEndian.Uint64(b)
		return nil
	})
	return v, err
}

// Close closes the database. The store must not be used afterwards.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate.Lock()
	defer s.gate.Unlock()
	if s.closed.Swap(true) {
		return nil
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("%w: close: %w", namespace.ErrStorage, err)
	}
	return nil
}

// Apply applies one command at raft index index with leader time
// leaderTime. An index at or below AppliedIndex is skipped with
// ErrAlreadyApplied, so a restart never applies an entry twice.
func (s *Store) Apply(index uint64, leaderTime int64, cmd *namespace.Command) *namespace.Result {
	return s.ApplyBatch([]namespace.BatchEntry{{Index: index, Time: leaderTime, Cmd: cmd}})[0]
}

// Clock is the leader time (unix nanoseconds) of the last committed
// command: the state machine's clock, which never goes backwards.
func (s *Store) Clock() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clock
}

// AppliedIndex is the index of the last applied entry.
func (s *Store) AppliedIndex() uint64 { return s.applied.Load() }

// Limits returns the cluster settings in force as of the last committed
// batch.
func (s *Store) Limits() namespace.Limits { return s.limits.Load().Limits }

// Sync makes every applied entry durable; call it before a snapshot.
func (s *Store) Sync() error {
	if s.closed.Load() {
		return namespace.ErrClosed
	}
	if err := s.db.Sync(); err != nil {
		return fmt.Errorf("%w: sync: %w", namespace.ErrStorage, err)
	}
	return nil
}

// CollectGarbage runs one pass of badger's value log garbage collection,
// reclaiming space held by overwritten large node data. The server calls it
// from time to time; it returns nil when there was nothing to collect.
func (s *Store) CollectGarbage(ctx context.Context) error {
	for ctx.Err() == nil {
		err := s.db.RunValueLogGC(0.5)
		if errors.Is(err, badger.ErrNoRewrite) || errors.Is(err, badger.ErrRejected) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: value log gc: %w", namespace.ErrStorage, err)
		}
	}
	return ctx.Err()
}

// badgerLogger routes badger's log lines to slog.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any)   { b.log(slog.LevelError, f, a) }
func (b badgerLogger) Warningf(f string, a ...any) { b.log(slog.LevelWarn, f, a) }
func (b badgerLogger) Infof(f string, a ...any)    { b.log(slog.LevelDebug, f, a) }
func (b badgerLogger) Debugf(f string, a ...any)   { b.log(slog.LevelDebug, f, a) }

func (b badgerLogger) log(level slog.Level, f string, a []any) {
	b.l.Log(context.Background(), level, strings.TrimSpace(fmt.Sprintf(f, a...)), "component", "badger")
}
