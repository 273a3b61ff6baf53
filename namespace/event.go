package namespace

import "fmt"

// EventType says what happened to a node or session.
type EventType uint8

// Event types. Lock events are appended later; never renumber these.
const (
	EventCreated EventType = iota + 1
	EventDeleted
	EventDataChanged
	EventChildrenChanged
	EventSessionOpened
	EventSessionClosed
	EventSessionExpired
)

var eventNames = [...]string{
	EventCreated:         "created",
	EventDeleted:         "deleted",
	EventDataChanged:     "data-changed",
	EventChildrenChanged: "children-changed",
	EventSessionOpened:   "session-opened",
	EventSessionClosed:   "session-closed",
	EventSessionExpired:  "session-expired",
}

func (t EventType) String() string {
	if int(t) < len(eventNames) && eventNames[t] != "" {
		return eventNames[t]
	}
	return fmt.Sprintf("event(%d)", uint8(t))
}

// Event is one change a command made, in the order it made them. Rev is the
// raft index of the command. Session is the session an event concerns: the
// session itself for session events, the owner for ephemeral node events.
type Event struct {
	Type    EventType
	Path    string
	Rev     uint64
	Session uint64
}
