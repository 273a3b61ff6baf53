package client

import (
	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// EventType says what a watch event reports.
type EventType uint8

// Event types. They have the values of namespace's event types, so types
// the server adds later arrive unchanged; EventResync is the client's.
const (
	EventCreated         = EventType(namespace.EventCreated)
	EventDeleted         = EventType(namespace.EventDeleted)
	EventDataChanged     = EventType(namespace.EventDataChanged)
	EventChildrenChanged = EventType(namespace.EventChildrenChanged)
	// Lock events, delivered to watches with Locks: a request granted, a
	// hold released (Cause "released", "canceled", "session-closed") or
	// lost (the other causes), and a conflicting request queued behind a
	// holder (Waiter).
	EventLockGranted   = EventType(namespace.EventLockGranted)
	EventLockReleased  = EventType(namespace.EventLockReleased)
	EventLockLost      = EventType(namespace.EventLockLost)
	EventLockContended = EventType(namespace.EventLockContended)
	// EventResync means events were lost (the server no longer held the
	// history the watch asked for, or the consumer fell behind): re-read
	// what you watch. Revision is where the watch continues from.
	EventResync = EventType(session.EventResync)
)

// String returns the type's name ("created", "resync").
func (t EventType) String() string {
	if t == EventResync {
		return "resync"
	}
	return namespace.EventType(t).String()
}

// IsLock reports whether t is a lock event (Locks).
func (t EventType) IsLock() bool { return namespace.EventType(t).IsLockEvent() }

// Event is one change delivered on a watch. Events of one watch arrive in
// revision order, each exactly once, across reconnections.
type Event struct {
	Type EventType
	// Path is the node the event concerns ("" for a Resync).
	Path string
	// Revision is the revision of the command that made the change.
	Revision uint64
	// Session is the owner of the ephemeral node concerned, or 0; for a
	// lock event, the holder (Path is its request node).
	Session uint64
	// Lock events only: the hold's fencing Token and Mode; Cause, how a
	// hold ended as lock history records it ("released", "canceled",
	// "session-closed", "session-expired", "hold-ttl-expired",
	// "deleted"); Waiter and WaiterSession, the conflicting request of an
	// EventLockContended.
	Token         uint64
	Mode          LockMode
	Cause         string
	Waiter        string
	WaiterSession uint64
}
