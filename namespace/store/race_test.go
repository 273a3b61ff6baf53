//go:build race

package store

// raceEnabled: timings mean nothing under the race detector.
const raceEnabled = true
