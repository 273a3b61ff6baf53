package raftnode

import (
	"fmt"
	"sync"
	"syscall"
	"time"

	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/latch-io/latch/session"
)

// Disk full is a refusal, not a crash. badger writes its memtables and
// value log through memory-mapped files that it sizes ahead of use; on a
// full disk a write into such a mapping kills the process (SIGBUS) before
// any error can be returned. So a member keeps a reserve: it watches the
// free space of its data dir, and while less than Config.MinFreeSpace is
// left
//
//   - the leader refuses every proposal with ErrNoSpace (session code
//     NoSpace, "no space left"), reads and keepalives go on;
//   - the state machine applies nothing more (it waits), so a follower
//     whose disk filled falls behind instead of crashing and catches up
//     from the log when space returns;
//   - latch_storage_no_space is 1 and one warning says so;
//   - a leader hands leadership to a member with space (the server's
//     handoff.go, on DiskGuard.Loop's polls), so the cluster goes on
//     taking writes, opening sessions and serving linearizable reads
//     through the new leader.
//
// When space is back the member logs it and writes resume by themselves.

// DiskPoll is how often a member looks at its free space.
const DiskPoll = 250 * time.Millisecond

// DiskGuardConfig is what a DiskGuard watches and tells.
type DiskGuardConfig struct {
	Dir     string // the data dir
	MinFree int64  // Config.MinFreeSpace; <= 0 turns the guard off
	Log     *slog.Logger
	// NoSpace is set to 1 while the disk is full, 0 otherwise
	// (latch_storage_no_space).
	NoSpace prometheus.Gauge
	// Stop ends Wait and Loop: the member is stopping.
	Stop <-chan struct{}
}

// DiskGuard keeps the reserve of free space: Refuse for the proposals,
// Wait for the FSM, Loop for the polls.
type DiskGuard struct {
	cfg DiskGuardConfig

	mu      sync.Mutex
	full    bool
	free    uint64
	changed chan struct{} // closed and replaced whenever full changes
}

// NewDiskGuard returns a guard that has not looked yet: Check once before
// use.
func NewDiskGuard(cfg DiskGuardConfig) *DiskGuard {
	return &DiskGuard{cfg: cfg, changed: make(chan struct{})}
}

// freeSpace returns the bytes available to this process on dir's file
// system.
func freeSpace(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}

// Check looks at the free space now and records whether the disk is full.
func (g *DiskGuard) Check() {
	if g.cfg.MinFree <= 0 {
		return
	}
	free, err := freeSpace(g.cfg.Dir)
	if err != nil {
		g.cfg.Log.Warn("cannot read the data dir's free space", "err", err)
		return
	}
	full := free < uint64(g.cfg.MinFree)
	g.mu.Lock()
	g.free = free
	if full == g.full {
		g.mu.Unlock()
		return
	}
	g.full = full
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
	if full {
		g.cfg.NoSpace.Set(1)
		g.cfg.Log.Warn("disk nearly full: refusing writes until space is freed",
			"free_bytes", free, "min_free_space", g.cfg.MinFree, "data_dir", g.cfg.Dir)
	} else {
		g.cfg.NoSpace.Set(0)
		g.cfg.Log.Info("disk space available again: writes resume", "free_bytes", free)
	}
}

// Refuse returns session.ErrNoSpace while the disk is full.
func (g *DiskGuard) Refuse() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.full {
		return fmt.Errorf("%w (%d bytes free, --min-free-space %d)", session.ErrNoSpace, g.free, g.cfg.MinFree)
	}
	return nil
}

// Wait blocks while the disk is full; false when the member stops first.
func (g *DiskGuard) Wait() bool {
	for {
		g.mu.Lock()
		full, changed := g.full, g.changed
		g.mu.Unlock()
		if !full {
			return true
		}
		select {
		case <-changed:
		case <-g.cfg.Stop:
			return false
		}
	}
}

// Loop polls the free space until the member stops, and tells polled
// whether the disk is full after each poll (a full leader hands
// leadership over).
func (g *DiskGuard) Loop(polled func(full bool)) {
	if g.cfg.MinFree <= 0 {
		return
	}
	tick := time.NewTicker(DiskPoll)
	defer tick.Stop()
	for {
		select {
		case <-g.cfg.Stop:
			return
		case <-tick.C:
			g.Check()
			polled(g.Refuse() != nil)
		}
	}
}
