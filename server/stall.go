package server

import (
	"fmt"
	"time"

	"github.com/latch-io/latch/server/raftnode"
)

// A disk that stops answering is a failure, not a slow moment. raft
// appends to its log from its main loop, so a leader whose write never
// returns stops committing, yet its heartbeats (sent from other
// goroutines) go on and keep the followers from electing anyone. The
// member watches the write in flight (raftstore.WAL.PendingWrite); one
// that has not returned after Config.StorageStallTimeout fails the member
// (storagefault.go) with ErrStorageStalled, and latchd then exits at once
// instead of waiting for raft to shut down (which waits for that write):
// the others see a dead leader and elect one, as after a crash, in the
// failover budget of server/doc.go counted from the detection. A follower
// whose disk stalls fails the same way and leaves the others a majority.
//
// With --fault-injection, POST /v1/faults/storage {"stall":true} holds
// every raft log write of the member ({"stall":false} lets them go on), so
// tests and chaos runs can make a disk stop answering.

// stallLoop fails the member when a raft log write has been in flight for
// longer than StorageStallTimeout.
func (s *Server) stallLoop() {
	limit := s.cfg.StorageStallTimeout
	if limit <= 0 {
		return
	}
	tick := time.NewTicker(min(limit/4, raftnode.DiskPoll))
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-tick.C:
			if d := s.raftStore.PendingWrite(now); d > limit {
				s.fail(fmt.Errorf("%w: a raft log write has not returned for %s (--storage-stall-timeout %s) in %s",
					ErrStorageStalled, d.Round(time.Millisecond), limit, s.dir("raft-wal")))
				return
			}
		}
	}
}
