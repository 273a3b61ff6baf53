package raftnode

import (
	"fmt"
	"time"
)

// A disk that stops answering is a failure, not a slow moment. raft
// appends to its log from its main loop, so a leader whose write never
// returns stops committing, yet its heartbeats (sent from other
// goroutines) go on and keep the followers from electing anyone. The
// member watches the write in flight (raftstore.WAL.PendingWrite); one
// that has not returned after Config.StorageStallTimeout fails the member
// (the server's storagefault.go) with ErrStorageStalled, and latchd then
// exits at once instead of waiting for raft to shut down (which waits for
// that write): the others see a dead leader and elect one, as after a
// crash, in the failover budget of server/doc.go counted from the
// detection. A follower whose disk stalls fails the same way and leaves
// the others a majority.
//
// With --fault-injection, POST /v1/faults/storage {"stall":true} holds
// every raft log write of the member ({"stall":false} lets them go on), so
// tests and chaos runs can make a disk stop answering.

// WatchWrites fails the member (fail, with ErrStorageStalled) when a
// write to the raft log in dir has been in flight for longer than limit
// (none when <= 0): pending says for how long one has been at a time. It
// returns after failing, or when stop closes.
func WatchWrites(stop <-chan struct{}, limit time.Duration, dir string, pending func(now time.Time) time.Duration, fail func(error)) {
	if limit <= 0 {
		return
	}
	tick := time.NewTicker(min(limit/4, DiskPoll))
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			if d := pending(now); d > limit {
				fail(fmt.Errorf("%w: a raft log write has not returned for %s (--storage-stall-timeout %s) in %s",
					ErrStorageStalled, d.Round(time.Millisecond), limit, dir))
				return
			}
		}
	}
}
