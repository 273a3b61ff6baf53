package main

import (
	"runtime/debug"
	"time"
)

// GC pacing: latchd's GC percent follows how fast clients arrive.
//
// A member at rest holds long-lived connection and session state and
// allocates little (keepalives), so Go's default GOGC of 100 costs almost
// no CPU there, while a higher percent lets the heap, and so the resident
// memory, grow to that multiple of what is live: at 400 about five times
// the live heap per idle session (116-140 KiB of RSS per session where
// about 25-30 KiB is live). A reconnect storm is the opposite: thousands
// of handshakes a second allocate fast while the live heap grows, and at
// 100 the collections and their mark assists slowed handshakes past their
// clients' patience (0 of 3 runs of `latch bench storm --sessions 5000`
// held at GOGC=100, 2 of 2 at 400). So latchd runs at gcQuietPercent and
// raises it to gcStormPercent at the first gcPaceTick in which more than
// gcStormHandshakes complete; it goes back only after gcQuietTicks ticks
// in a row with at most gcQuietHandshakes each: a storm that slows (the
// member is short of CPU: that is when GC work hurts most) is still a
// storm. The Go runtime's scavenger then returns the storm's unused heap
// to the OS over the following minutes; debug.FreeOSMemory would do it
// at once, but it holds the heap lock while it does, and a run that
// called it mid-storm lost hundreds of connections at that moment. GOGC
// in the environment turns pacing off: the operator's number holds.
const (
	gcQuietPercent    = 100
	gcStormPercent    = 400
	gcPaceTick        = time.Second
	gcStormHandshakes = 50 // per tick: a storm, not clients coming and going
	gcQuietHandshakes = 5  // per tick: at most this many is quiet
	gcQuietTicks      = 30
)

// gcPacer decides the GC percent from the count of completed client
// handshakes, read once per tick (step).
type gcPacer struct {
	set func(percent int) // debug.SetGCPercent

	last  uint64 // handshakes at the last step
	storm bool   // running at gcStormPercent
	quiet int    // quiet ticks in a row during a storm
}

func newGCPacer() *gcPacer {
	p := &gcPacer{set: func(pc int) { debug.SetGCPercent(pc) }}
	p.set(gcQuietPercent)
	return p
}

// step takes the handshakes completed so far (a counter).
func (p *gcPacer) step(handshakes uint64) {
	n := handshakes - p.last
	p.last = handshakes
	switch {
	case n > gcStormHandshakes:
		p.quiet = 0
		if !p.storm {
			p.storm = true
			p.set(gcStormPercent)
		}
	case !p.storm:
	case n > gcQuietHandshakes:
		p.quiet = 0
	default:
		p.quiet++
		if p.quiet >= gcQuietTicks {
			p.storm = false
			p.set(gcQuietPercent)
		}
	}
}

// run steps p every gcPaceTick until stop is closed.
func (p *gcPacer) run(handshakes func() uint64, stop <-chan struct{}) {
	t := time.NewTicker(gcPaceTick)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			p.step(handshakes())
		case <-stop:
			return
		}
	}
}
