// Package watch is a member's watch hub: it takes every applied batch of
// namespace events (Hub.Applied, on the FSM goroutine) and delivers each
// event to the watches that want it, in revision order, exactly once.
//
// It owns no stream and no goroutine. A front (the QUIC stream in
// package server, the HTTP API's SSE stream) makes a Watcher with
// NewWatcher, Registers it, and runs the writer: wait on Notify, Take
// the queued events, send them (Sent gives their bytes back), and end
// when Take says the watch is done, with Reason next to a final Resync;
// Unregister when the stream ends. Authorization, framing and the
// per-connection watch count stay with the front.
//
// Decisions:
//
//   - History: the hub keeps the last Config.History watchable events in
//     a ring, so a watch can start after a past revision (a client that
//     reconnected resumes where it was). When that revision is older than
//     the ring, or a snapshot was installed since (Log.Restores moved),
//     the watch gets a Resync at the current revision instead: never a
//     silent gap.
//   - Routing costs one map lookup per ancestor of an event's path, not a
//     scan of the watchers: non-recursive watchers are indexed by their
//     path, recursive ones by their root.
//   - Registration (with its replay) and delivery happen under one lock,
//     so nothing applied between the two is lost or seen twice.
//   - Applied never blocks on a watcher. A watch that falls behind its
//     queue (Config.Buffer events) or a byte cap is finished with a
//     Resync naming the revision before the oldest event it missed, so
//     the client resumes without a gap; the reason names the cap's latchd
//     flag (CapBacklogBytes, CapBytesPerConn).
//   - Memory is bounded in bytes: an event counts its path plus
//     EventOverhead against the hub's total and its connection's Budget
//     from the moment it is queued until its writer says it was sent.
//   - Lock events (Path: the request node) go only to watches with
//     WatchLocks: those of the locked path and recursive ones above it.
//
// The hub reads the member only through Log (its applied index and
// snapshot-install count), so it is tested without a member: the tests
// drive Applied with batches they make and check every watch against a
// model of the full log.
package watch
