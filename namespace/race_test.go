//go:build race

package namespace

// raceEnabled: timings mean nothing under the race detector.
const raceEnabled = true
