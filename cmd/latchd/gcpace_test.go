package main

import (
	"slices"
	"testing"
)

// The pacer raises the GC percent at the first tick with more handshakes
// than a storm's threshold, keeps it while they still come (even slowly:
// a member short of CPU completes fewer) and through lulls shorter than
// gcQuietTicks, and goes back only after that many quiet ticks in a row.
// A pacer that never goes back leaves the member at five times its live
// heap for good; one that drops while a slowed storm goes on collects
// over and over when the member can least afford it.
func TestGCPacer(t *testing.T) {
	var set []int
	p := &gcPacer{set: func(pc int) { set = append(set, pc) }}
	total := uint64(0)
	tick := func(handshakes uint64) {
		total += handshakes
		p.step(total)
	}
	tick(3)
	tick(gcStormHandshakes) // not above the threshold: clients coming and going
	if len(set) != 0 {
		t.Fatalf("quiet ticks set the GC percent: %v", set)
	}
	tick(gcStormHandshakes + 1)
	tick(500)
	if !slices.Equal(set, []int{gcStormPercent}) {
		t.Fatalf("storm: GC percent set to %v, want [%d] once", set, gcStormPercent)
	}
	for range 3 * gcQuietTicks {
		tick(gcQuietHandshakes + 1) // the storm slowed, it did not end
	}
	for range gcQuietTicks - 1 {
		tick(0)
	}
	tick(400) // the storm again before the lull ended
	for range gcQuietTicks - 1 {
		tick(gcQuietHandshakes)
	}
	if !slices.Equal(set, []int{gcStormPercent}) {
		t.Fatalf("slowed storm or lull shorter than %d ticks: GC percent %v", gcQuietTicks, set)
	}
	tick(1)
	if !slices.Equal(set, []int{gcStormPercent, gcQuietPercent}) {
		t.Fatalf("after the storm: GC percent %v, want back to %d", set, gcQuietPercent)
	}
	for range 2 * gcQuietTicks {
		tick(gcStormHandshakes)
	}
	if len(set) != 2 {
		t.Fatalf("member at rest kept setting: %v", set)
	}
}
