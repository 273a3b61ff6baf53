package quicfront

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testWorkers returns workers whose goroutines are counted and waited
// for, a channel that receives when a worker parks (became idle) and one
// that receives when a worker's goroutine ends.
func testWorkers(t *testing.T, idleFor time.Duration) (w *callWorkers, spawned *atomic.Int32, parked, ended <-chan struct{}, stop chan struct{}) {
	t.Helper()
	stop = make(chan struct{})
	park, end := make(chan struct{}, 16), make(chan struct{}, 16)
	spawned = new(atomic.Int32)
	var wg sync.WaitGroup
	w = &callWorkers{
		stop:    stop,
		idleFor: idleFor,
		maxIdle: 2,
		spawn: func(f func()) {
			spawned.Add(1)
			wg.Go(func() { f(); end <- struct{}{} })
		},
		parked: func() { park <- struct{}{} },
	}
	t.Cleanup(func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	})
	return w, spawned, park, end, stop
}

// TestCallWorkersReuse: a call after another has ended runs on the same
// worker (its stack already grown); calls at once each get one.
func TestCallWorkersReuse(t *testing.T) {
	w, spawned, parked, ended, stop := testWorkers(t, time.Hour)
	for i := range 5 {
		done := make(chan struct{})
		w.run(func() { close(done) })
		<-done
		<-parked
		if got := spawned.Load(); got != 1 {
			t.Fatalf("after %d calls one after another: %d workers started, want 1", i+1, got)
		}
	}
	release := make(chan struct{})
	var running sync.WaitGroup
	running.Add(2)
	for range 2 {
		w.run(func() { running.Done(); <-release })
	}
	running.Wait() // both run at once: neither waits for the other
	close(release)
	<-parked
	<-parked
	if got := spawned.Load(); got != 2 {
		t.Fatalf("two calls at once: %d workers started in all, want 2", got)
	}
	close(stop) // ends both idle workers
	<-ended
	<-ended
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.idle) != 0 {
		t.Fatalf("%d workers still idle after stop", len(w.idle))
	}
}

// TestCallWorkersEnd: an idle worker ends after idleFor; a call after
// that starts a new one.
func TestCallWorkersEnd(t *testing.T) {
	w, spawned, parked, ended, stop := testWorkers(t, 0)
	done := make(chan struct{})
	w.run(func() { close(done) })
	<-done
	<-parked
	<-ended // idle for idleFor (0): it left the idle stack and ended
	ran := make(chan struct{})
	w.run(func() { close(ran) })
	<-ran
	if got := spawned.Load(); got != 2 {
		t.Fatalf("a call after the idle worker ended: %d workers started in all, want 2", got)
	}
	close(stop)
}

// TestCallWorkersMaxIdle: after a burst, workers beyond maxIdle end at
// once instead of waiting idle.
func TestCallWorkersMaxIdle(t *testing.T) {
	w, spawned, parked, ended, _ := testWorkers(t, time.Hour) // maxIdle 2
	release := make(chan struct{})
	var running sync.WaitGroup
	running.Add(3)
	for range 3 {
		w.run(func() { running.Done(); <-release })
	}
	running.Wait()
	close(release)
	parks, ends := 0, 0
	for range 3 { // each worker either parks or ends
		select {
		case <-parked:
			parks++
		case <-ended:
			ends++
		}
	}
	if got := spawned.Load(); got != 3 || parks != 2 || ends != 1 {
		t.Fatalf("after 3 calls at once: %d workers started, %d went idle, %d ended; want 3, 2, 1", got, parks, ends)
	}
}
