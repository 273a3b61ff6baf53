package raftstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/hashicorp/raft"
)

var (
	// ErrKeyNotFound is returned by Get for a stable key never set. Its text is
	// exactly what hashicorp/raft compares against, hence no "latch: " prefix.
	ErrKeyNotFound = errors.New("not found")
	// ErrCorruptLog is returned when a stored log entry cannot be decoded.
	ErrCorruptLog = errors.New("latch: corrupt raft log entry")
	// ErrClosed is returned by every method after Close.
	ErrClosed = errors.New("latch: raft store closed")
	// ErrNoDir is returned by Open when Config.Dir is empty.
	ErrNoDir = errors.New("latch: raft store needs a directory")
)

// Key prefixes; see doc.go for the layout.
const (
	prefixLog    = 'l'
	prefixStable = 's'
)

// Config says where the store lives and where badger logs go.
type Config struct {
	// Dir is the badger directory, created if missing. Required.
	Dir string
	// Logger receives badger's warnings and errors; nil means slog.Default().
	Logger *slog.Logger
}

// Store is a badger-backed raft.LogStore and raft.StableStore. It is safe for
// concurrent use; writes are serialized.
type Store struct {
	db *badger.DB

	// writeMu serializes writers so first and last stay exact: raft appends
	// from its main loop while compaction deletes from the snapshot goroutine.
	writeMu sync.Mutex
	first   atomic.Uint64
	last    atomic.Uint64
	closed  atomic.Bool
}

var (
	_ raft.LogStore    = (*Store)(nil)
	_ raft.StableStore = (*Store)(nil)
)

// Open opens or creates the store in cfg.Dir with fsync on every commit.
func Open(cfg Config) (*Store, error) {
	if cfg.Dir == "" {
		return nil, ErrNoDir
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	opts := badger.DefaultOptions(cfg.Dir).
		WithSyncWrites(true).
		WithDetectConflicts(false).
		WithLogger(badgerLogger{logger.With("component", "raftstore")}).
		WithMemTableSize(16 << 20).
		WithNumMemtables(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8).
		WithBlockCacheSize(8 << 20).
		WithIndexCacheSize(4 << 20).
		WithValueLogFileSize(64 << 20).
		WithNumCompactors(2).
		WithCompression(options.None).
		// Damaged files fail instead of yielding wrong entries: tables are
		// verified whole when opened, value-log values on every read (see
		// namespace/integrity.go for why not OnTableAndBlockRead).
		WithChecksumVerificationMode(options.OnTableRead).
		WithVerifyValueChecksum(true).
		WithMetricsEnabled(false)
	db, err := badger.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("latch: open raft store %s: %w", cfg.Dir, err)
	}
	s := &Store{db: db}
	if err := s.loadBounds(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the database. Raft must be shut down first.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	return s.db.Close()
}

// loadBounds reads the first and last log index from disk.
func (s *Store) loadBounds() error {
	return s.db.View(func(txn *badger.Txn) error {
		first, last := scanBounds(txn)
		s.first.Store(first)
		s.last.Store(last)
		return nil
	})
}

// scanBounds seeks to both ends of the log prefix.
func scanBounds(txn *badger.Txn) (first, last uint64) {
	opts := badger.DefaultIteratorOptions
	opts.PrefetchValues = false
	opts.Prefix = []byte{prefixLog}
	it := txn.NewIterator(opts)
	it.Rewind()
	if it.Valid() {
		first = indexOf(it.Item().Key())
	}
	it.Close()

	opts.Reverse = true
	it = txn.NewIterator(opts)
	defer it.Close()
	// In reverse, seeking to the prefix followed by 0xff lands on the largest key.
	it.Seek([]byte{prefixLog, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	if it.Valid() {
		last = indexOf(it.Item().Key())
	}
	return first, last
}

// badgerLogger routes badger's log lines into slog. Badger is chatty at info
// (compactions, flushes), so info and debug go to slog's debug level.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any) { b.log(slog.LevelError, f, a) }
func (b badgerLogger) Warningf(f string, a ...any) {
	b.log(slog.LevelWarn, f, a)
}
func (b badgerLogger) Infof(f string, a ...any)  { b.log(slog.LevelDebug, f, a) }
func (b badgerLogger) Debugf(f string, a ...any) { b.log(slog.LevelDebug-4, f, a) }

func (b badgerLogger) log(level slog.Level, f string, a []any) {
	ctx := context.Background()
	if !b.l.Enabled(ctx, level) {
		return
	}
	b.l.Log(ctx, level, trimNewline(fmt.Sprintf(f, a...)))
}

func trimNewline(s string) string {
	for len(s) > 0 && s[len(s)-1] == '\n' {
		s = s[:len(s)-1]
	}
	return s
}
