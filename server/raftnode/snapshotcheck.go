package raftnode

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/latch-io/latch/namespace/store"
)

// Every restore checks a snapshot whole before it replaces anything
// (store.CheckSnapshot: its checksum, metadata, and that every lock
// request has its session and its own node). The namespace store drops
// its state before it reads a snapshot, so a snapshot that failed halfway
// would leave a member with no state; and raft panics when the FSM refuses
// a user restore. So:
//
//   - a backup (RestoreBackup) is checked before raft sees it, and
//     refused with ErrBadRequest: raft, the store and the data dir are
//     left as they were;
//   - a snapshot raft installs (from the leader, or the restore above) is
//     spooled to a file in the data dir and checked there first; a bad one
//     fails the install and the member keeps its state.

// spooledSnapshot is a checked snapshot in a temporary file, removed on
// Close.
type spooledSnapshot struct {
	*os.File
	r *bufio.Reader
}

func (s *spooledSnapshot) Read(p []byte) (int, error) { return s.r.Read(p) }

func (s *spooledSnapshot) Close() error {
	return errors.Join(s.File.Close(), os.Remove(s.File.Name()))
}

// spoolPattern names the spooled snapshots in the data dir; a crash can
// leave one, which RemoveSpools deletes at the next start.
const spoolPattern = "snapshot-*.restore"

// RemoveSpools deletes snapshots spooled by a member that crashed while it
// checked or restored one.
func RemoveSpools(dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, spoolPattern))
	for _, f := range files {
		os.Remove(f)
	}
}

// spoolSnapshot copies r into a file in dir ("" for the system's temporary
// directory), checks it, and returns it positioned at its start.
func spoolSnapshot(r io.Reader, dir string) (*spooledSnapshot, error) {
	f, err := os.CreateTemp(dir, spoolPattern)
	if err != nil {
		return nil, fmt.Errorf("latch: spool snapshot: %w", err)
	}
	s := &spooledSnapshot{File: f}
	fail := func(err error) (*spooledSnapshot, error) {
		s.Close()
		return nil, err
	}
	if _, err := io.Copy(f, r); err != nil {
		return fail(fmt.Errorf("latch: spool snapshot: %w", err))
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fail(fmt.Errorf("latch: spool snapshot: %w", err))
	}
	if _, err := store.CheckSnapshot(f); err != nil {
		return fail(fmt.Errorf("latch: snapshot refused, state unchanged: %w", err))
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fail(fmt.Errorf("latch: spool snapshot: %w", err))
	}
	s.r = bufio.NewReaderSize(f, 256<<10)
	return s, nil
}
