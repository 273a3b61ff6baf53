package raftstore

import (
	"sync"
	"sync/atomic"
	"time"
)

// writeWatch times the log write in flight, so the server can tell a disk
// that stopped answering (a write that never returns) from a slow one, and
// holds writes back on request (fault injection).
type writeWatch struct {
	start atomic.Int64 // unix nanos when the write in flight began; 0: none

	mu   sync.Mutex
	held chan struct{} // non-nil while writes are held; closed on release
}

func (ww *writeWatch) begin() {
	ww.start.Store(time.Now().UnixNano())
	ww.mu.Lock()
	held := ww.held
	ww.mu.Unlock()
	if held != nil {
		<-held
	}
}

func (ww *writeWatch) end() { ww.start.Store(0) }

// PendingWrite returns how long the log write in flight has been running
// at now, or 0 when none is. raft appends from one goroutine (its main
// loop, leader or follower), so there is at most one.
func (w *WAL) PendingWrite(now time.Time) time.Duration {
	start := w.watch.start.Load()
	if start == 0 {
		return 0
	}
	return now.Sub(time.Unix(0, start))
}

// HoldWrites makes every log write from now on wait, as on a disk that
// stopped answering, until HoldWrites(false). For fault injection only
// (POST /v1/faults/storage on a member started with --fault-injection).
func (w *WAL) HoldWrites(hold bool) {
	w.watch.mu.Lock()
	defer w.watch.mu.Unlock()
	switch {
	case hold && w.watch.held == nil:
		w.watch.held = make(chan struct{})
	case !hold && w.watch.held != nil:
		close(w.watch.held)
		w.watch.held = nil
	}
}
