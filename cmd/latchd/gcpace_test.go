package main

import (
	"slices"
	"testing"
)

// The pacer raises the GC percent while handshakes arrive faster than a
// storm's threshold, keeps it through short lulls, and goes back (and
// frees the storm's heap) only after gcQuietTicks quiet ticks. A pacer
// that never goes back leaves the member at five times its live heap for
// good; one that drops at the first lull collects over and over while a
// storm is still on.
func TestGCPacer(t *testing.T) {
	var set []int
	freed := 0
	p := &gcPacer{set: func(pc int) { set = append(set, pc) }, freeOS: func() { freed++ }}
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
	for range gcQuietTicks - 1 {
		tick(0)
	}
	tick(400) // the storm again before the lull ended
	for range gcQuietTicks - 1 {
		tick(1)
	}
	if !slices.Equal(set, []int{gcStormPercent}) || freed != 0 {
		t.Fatalf("lull shorter than %d ticks: GC percent %v, freed %d times", gcQuietTicks, set, freed)
	}
	tick(1)
	if !slices.Equal(set, []int{gcStormPercent, gcQuietPercent}) || freed != 1 {
		t.Fatalf("after the storm: GC percent %v, freed %d times; want back to %d, freed once", set, freed, gcQuietPercent)
	}
	for range 2 * gcQuietTicks {
		tick(0)
	}
	if len(set) != 2 || freed != 1 {
		t.Fatalf("quiet member kept setting: %v, freed %d", set, freed)
	}
}
