//go:build race

package raftstore

// raceEnabled: the race detector allocates on its own; allocation bounds
// mean nothing under it.
const raceEnabled = true
