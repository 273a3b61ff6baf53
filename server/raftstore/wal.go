package raftstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
)

// ErrLocked is returned by OpenWAL when another process has the WAL open.
var ErrLocked = errors.New("latch: raft log is in use by another process (is another latchd running on this data dir?)")

// WAL is a member's raft log and stable store: a hashicorp/raft-wal WAL
// that also holds an exclusive lock on its directory, checksums every
// entry it stores and verifies it on every read (checksum.go), hides
// entries below a head truncation and releases its metadata database on
// Close (so a member can reopen it in the same process).
type WAL struct {
	*wal.WAL
	meta *metadb.BoltMetaDB
	lock *os.File
	dir  string
	// checkedFrom is the first index stored with a checksum; set at open.
	checkedFrom uint64
	corrupt     corruption
	watch       writeWatch // stall.go
}

var (
	_ raft.LogStore          = (*WAL)(nil)
	_ raft.StableStore       = (*WAL)(nil)
	_ raft.MonotonicLogStore = (*WAL)(nil)
)

// Close closes the WAL; raft must be shut down first.
func (w *WAL) Close() error {
	err := errors.Join(w.WAL.Close(), w.meta.Close())
	return errors.Join(err, w.lock.Close()) // closing the file releases the flock
}

// WALConfig says where a member's raft write-ahead log lives.
type WALConfig struct {
	// Dir is the WAL directory, created if missing. Required.
	Dir string
	// MigrateFrom is the directory of a badger Store written by an older
	// latch (a member's <data-dir>/raft). When it holds a store, Open copies
	// its log and stable keys into a fresh WAL in Dir and then removes it;
	// an empty or missing directory is ignored.
	MigrateFrom string
	// Logger receives the WAL's log lines; nil discards them.
	Logger hclog.Logger
}

// OpenWAL opens (or creates) the member's raft log and stable store, a
// hashicorp/raft-wal WAL: one write and one fsync per StoreLogs batch. See
// doc.go for why this and not the badger Store. It reads and verifies
// every entry first: a damaged log is an error wrapping ErrCorruptLog that
// names the directory and the index, and nothing is opened.
func OpenWAL(cfg WALConfig) (*WAL, error) {
	if cfg.Dir == "" {
		return nil, ErrNoDir
	}
	if cfg.MigrateFrom != "" {
		if err := migrate(cfg); err != nil {
			return nil, err
		}
	}
	return openWAL(cfg)
}

func openWAL(cfg WALConfig) (*WAL, error) {
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("latch: create raft log dir: %w", err)
	}
	// bbolt, under the WAL's metadata, waits forever for its file lock:
	// take our own first, so a second process fails at once.
	lock, err := os.OpenFile(filepath.Join(cfg.Dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("latch: raft log lock: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("%w: %s: %v", ErrLocked, cfg.Dir, err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	meta := &metadb.BoltMetaDB{}
	w, err := wal.Open(cfg.Dir, wal.WithLogger(logger), wal.WithMetaStore(meta))
	if err != nil {
		meta.Close()
		lock.Close()
		return nil, fmt.Errorf("latch: open raft log %s: %w", cfg.Dir, err)
	}
	lw := &WAL{WAL: w, meta: meta, lock: lock, dir: cfg.Dir, corrupt: corruption{ch: make(chan struct{})}}
	err = lw.loadCheckedFrom()
	if err == nil {
		err = lw.verifyAll()
	}
	if err != nil {
		lw.Close()
		return nil, err
	}
	return lw, nil
}
