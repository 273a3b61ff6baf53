package server

import (
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/raft"

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
//   - a leader hands leadership to a member with space (handoff.go), so
//     the cluster goes on taking writes, opening sessions and serving
//     linearizable reads through the new leader.
//
// When space is back the member logs it and writes resume by themselves.

// ErrNoSpace is the refusal of a write on a member whose disk is full.
var ErrNoSpace = session.ErrNoSpace

// diskPoll is how often a member looks at its free space.
const diskPoll = 250 * time.Millisecond

type diskGuard struct {
	s       *Server
	handOff handOff // a full leader hands leadership over (handoff.go)

	mu      sync.Mutex
	full    bool
	free    uint64
	changed chan struct{} // closed and replaced whenever full changes
}

func newDiskGuard(s *Server) *diskGuard {
	return &diskGuard{s: s, changed: make(chan struct{})}
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

// check looks at the free space now and records whether the disk is full.
func (g *diskGuard) check() {
	if g.s.cfg.MinFreeSpace <= 0 {
		return
	}
	free, err := freeSpace(g.s.cfg.DataDir)
	if err != nil {
		g.s.log.Warn("cannot read the data dir's free space", "err", err)
		return
	}
	full := free < uint64(g.s.cfg.MinFreeSpace)
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
	registerIntegrityMetrics()
	if full {
		noSpaceGauge.WithLabelValues(g.s.cfg.ID).Set(1)
		g.s.log.Warn("disk nearly full: refusing writes until space is freed",
			"free_bytes", free, "min_free_space", g.s.cfg.MinFreeSpace, "data_dir", g.s.cfg.DataDir)
	} else {
		noSpaceGauge.WithLabelValues(g.s.cfg.ID).Set(0)
		g.s.log.Info("disk space available again: writes resume", "free_bytes", free)
	}
}

// refuse returns ErrNoSpace while the disk is full.
func (g *diskGuard) refuse() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.full {
		return fmt.Errorf("%w (%d bytes free, --min-free-space %d)", ErrNoSpace, g.free, g.s.cfg.MinFreeSpace)
	}
	return nil
}

// wait blocks while the disk is full; false when the member stops first.
func (g *diskGuard) wait() bool {
	for {
		g.mu.Lock()
		full, changed := g.full, g.changed
		g.mu.Unlock()
		if !full {
			return true
		}
		select {
		case <-changed:
		case <-g.s.stop:
			return false
		}
	}
}

// loop polls the free space until the member stops.
func (g *diskGuard) loop() {
	if g.s.cfg.MinFreeSpace <= 0 {
		return
	}
	tick := time.NewTicker(diskPoll)
	defer tick.Stop()
	for {
		select {
		case <-g.s.stop:
			return
		case <-tick.C:
			g.check()
			switch {
			case g.refuse() == nil:
				g.handOff.reset()
			case g.s.raft.State() == raft.Leader:
				g.handOff.start(g.s, "disk full")
			}
		}
	}
}
