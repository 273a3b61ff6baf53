// Package namespace is latch's deterministic state machine: commands in,
// state (in badger) and events out. No raft, network, goroutines or clocks.
package namespace
