package namespace

import "fmt"

// EventType says what happened to a node or session.
type EventType uint8

// Event types. Never renumber these; append new ones.
const (
	EventCreated EventType = iota + 1
	EventDeleted
	EventDataChanged
	EventChildrenChanged
	EventSessionOpened
	EventSessionClosed
	EventSessionExpired
	EventLockGranted  // Path is the request node, Session its owner, Rev the fencing token
	EventLockReleased // a held lock was released or cancelled, or its session closed
	EventLockLost     // a held lock was taken away: session expired, hold TTL passed, node deleted
	// EventLockContended tells a holder that a request conflicting with
	// its lock was queued behind it: Path is the held request node,
	// Session its owner, Waiter and WaiterSession the new request.
	EventLockContended
)

var eventNames = [...]string{
	EventCreated:         "created",
	EventDeleted:         "deleted",
	EventDataChanged:     "data-changed",
	EventChildrenChanged: "children-changed",
	EventSessionOpened:   "session-opened",
	EventSessionClosed:   "session-closed",
	EventSessionExpired:  "session-expired",
	EventLockGranted:     "lock-granted",
	EventLockReleased:    "lock-released",
	EventLockLost:        "lock-lost",
	EventLockContended:   "lock-contended",
}

func (t EventType) String() string {
	if int(t) < len(eventNames) && eventNames[t] != "" {
		return eventNames[t]
	}
	return fmt.Sprintf("event(%d)", uint8(t))
}

// Event is one change a command made, in the order it made them. Rev is the
// raft index of the command. Session is the session an event concerns: the
// session itself for session events, the owner for ephemeral node events
// and the holder (or requester) for lock events.
type Event struct {
	Type    EventType
	Path    string
	Rev     uint64
	Session uint64
	// Lock is what a lock event tells besides (nil for other events): a
	// pointer, so that the many node events (which watch hubs keep by the
	// hundred thousand) stay small.
	Lock *LockNote
}

// LockNote details a lock event. Token is the hold's fencing token; Mode
// its mode. Cause says how a hold ended (EventLockReleased,
// EventLockLost), in lock history's words: "released", "canceled",
// "session-closed", "session-expired", "hold-ttl-expired" or "deleted".
// Waiter and WaiterSession name the conflicting request
// (EventLockContended).
type LockNote struct {
	Token         uint64
	Mode          LockMode
	Cause         string
	Waiter        string
	WaiterSession uint64
}

// IsNodeEvent reports whether t changes a node: created, deleted, data or
// children changed.
func (t EventType) IsNodeEvent() bool {
	switch t {
	case EventCreated, EventDeleted, EventDataChanged, EventChildrenChanged:
		return true
	}
	return false
}

// IsLockEvent reports whether t is about a lock request (Path is its
// node) rather than a node or a session.
func (t EventType) IsLockEvent() bool {
	return t == EventLockGranted || t == EventLockReleased || t == EventLockLost || t == EventLockContended
}
