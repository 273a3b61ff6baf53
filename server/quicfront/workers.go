package quicfront

import (
	"slices"
	"sync"
	"time"
)

// callWorkers run the calls of mux streams on goroutines that outlive one
// call.
//
// A call's handler runs deep: a read goes through the ACL check, the
// namespace and badger's levels. A goroutine started for it begins with a
// small stack that grows, and is copied, once or twice on every call;
// under 64 concurrent stale reads that copying was 17% of the leader's
// CPU (runtime.newstack and copystack in its profile). A worker keeps its
// grown stack from call to call (the GC halves the stack of an idle one).
// Idle workers wait on a stack, the last to finish on top, so the busiest
// few stay warm; one idle for idleFor ends, and the member's stop ends
// them all. At most maxIdle wait: after a burst of thousands of calls at
// once the rest end at once, instead of holding their stacks for idleFor.
type callWorkers struct {
	stop    <-chan struct{}
	spawn   func(func()) // starts an owned goroutine (Parts.Go)
	idleFor time.Duration
	maxIdle int
	parked  func() // tests: called when a worker has become idle

	mu   sync.Mutex
	idle []chan func() // each idle worker's inbox (buffered, one call)
}

// workerIdle is how long an idle worker waits for another call;
// maxIdleWorkers how many may wait.
const (
	workerIdle     = 10 * time.Second
	maxIdleWorkers = 1024
)

func newCallWorkers(stop <-chan struct{}, spawn func(func())) *callWorkers {
	return &callWorkers{stop: stop, spawn: spawn, idleFor: workerIdle, maxIdle: maxIdleWorkers}
}

// run runs f on the worker that became idle last, or on a new one when
// none is idle. It never blocks.
func (w *callWorkers) run(f func()) {
	w.mu.Lock()
	if n := len(w.idle); n > 0 {
		inbox := w.idle[n-1]
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		inbox <- f
		return
	}
	w.mu.Unlock()
	w.spawn(func() { w.loop(f) })
}

func (w *callWorkers) loop(f func()) {
	inbox := make(chan func(), 1)
	idle := time.NewTimer(w.idleFor)
	defer idle.Stop()
	for {
		f()
		w.mu.Lock()
		if len(w.idle) >= w.maxIdle {
			w.mu.Unlock()
			return
		}
		w.idle = append(w.idle, inbox)
		w.mu.Unlock()
		if w.parked != nil {
			w.parked()
		}
		idle.Reset(w.idleFor)
		select {
		case f = <-inbox:
			continue
		case <-idle.C:
		case <-w.stop:
		}
		if !w.leave(inbox) {
			f = <-inbox // run took this worker as it was leaving
			continue
		}
		return
	}
}

// leave takes the worker with this inbox off the idle stack, unless run
// took it first (false: its call is on the way).
func (w *callWorkers) leave(inbox chan func()) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := slices.Index(w.idle, inbox)
	if i < 0 {
		return false
	}
	w.idle = slices.Delete(w.idle, i, i+1)
	return true
}
