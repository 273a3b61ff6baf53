package session

// The message types of the wire protocol; the envelopes they travel in,
// Request and Response, are in messages.go.

// MsgType says what a Request asks for. Values are part of the wire format:
// append new types at the end, never renumber.
type MsgType uint8

// Message types. Each comment says which Request fields are read and which
// Response fields are set on success.
const (
	MsgInvalid MsgType = iota // zero value; always rejected with ErrUnknownType

	// MsgHello must be the first request on a connection.
	// Request: ProtocolVersion, ClientName. Response: ProtocolVersion, ServerID.
	MsgHello
	// MsgOpenSession creates a session owned by this connection.
	// Request: TTLMillis (wish). Response: Session, Secret, TTLMillis (granted).
	MsgOpenSession
	// MsgResumeSession attaches an existing session to this connection
	// (reconnect or failover). Request: Session, Secret. Response: TTLMillis.
	MsgResumeSession
	// MsgCloseSession ends Session, deleting its ephemeral nodes.
	MsgCloseSession
	// MsgKeepAlive renews Session's lease. Served by the leader from memory;
	// never touches the raft log. Response: TTLMillis.
	// With Sessions (only sent to a server whose Hello answer has
	// FeatureKeepAliveBatch) it renews Session and every one of Sessions,
	// each attached to this connection, in one message; Response:
	// KeepAlives, one result per session (Session first, then Sessions in
	// order). The response's own Code is for the request as a whole
	// (ErrNotLeader); a session's failure is only in its result.
	MsgKeepAlive

	// MsgCreate creates Path. Request: Path, Data, Flags (Session owns
	// ephemerals). Response: Path (actual, with sequence suffix), Stat, Rev.
	MsgCreate
	// MsgGet reads Path. Request: Path, Stale. Response: Data, Stat, Rev.
	MsgGet
	// MsgSet writes Path. Request: Path, Data, Version (namespace.AnyVersion
	// skips the check; 0 means "expect version 0"). Response: Stat, Rev.
	MsgSet
	// MsgDelete removes Path. Request: Path, Version, Recursive. Response: Rev.
	MsgDelete
	// MsgStat reads Path's metadata. Request: Path, Stale. Response: Stat, Rev.
	MsgStat
	// MsgExists is MsgStat without ErrNoNode. Response: Exists, Stat, Rev.
	MsgExists
	// MsgChildren lists one page of Path's children, sorted, after After.
	// Request: Path, After, Limit (0 = server default), Stale.
	// Response: Names, More, Rev.
	MsgChildren
	// MsgMulti applies Ops all-or-nothing. Response: Results (one per op; on
	// failure Code is the first failing op's code), Rev.
	MsgMulti
	// MsgSync waits until the serving member has applied everything committed
	// before the request. Response: Rev.
	MsgSync

	// MsgWatch opens a streaming watch on Path. Request: Path, Kind, FromRev
	// (0 = from now), OneShot. The first response frame acknowledges the
	// watch (Rev = the revision it starts after, no Events); every later
	// frame carries Events in revision order. The client cancels by closing
	// the stream; a frame with Code != 0 ends it.
	MsgWatch

	// MsgSessions lists sessions (no secrets). Response: Sessions.
	MsgSessions
	// MsgMembers lists cluster members. Response: Members, Leader.
	MsgMembers
	// MsgStatus describes the serving member. Response: Status, Leader.
	MsgStatus

	// MsgLock queues a lock request on Path and streams its progress.
	// Request: Path, Mode, TimeoutMillis (0 = wait until ctx ends),
	// HoldTTLMillis (0 = held while the session lives), LockDelayMillis,
	// Data (the request node's data: an election candidate's value), Try
	// (fail with ErrLocked unless the request is granted at once).
	// Frames: Lock=LockQueued with Node and Rev, then Lock=LockGranted with
	// Token, Node and Rev (Rev: the request's revision, its queue order);
	// or a frame with Code != 0 (ErrTimeout, ErrWouldDeadlock, ErrLocked,
	// ...). With FeatureLockNext, LockQueued has Next set when the request
	// is next in line, and a waiter that moves up to next gets a second
	// LockQueued frame with Next. Resetting the stream while the connection lives withdraws the
	// request (or releases the lock once granted); a connection lost
	// leaves it, for the client to re-attach.
	//
	// After the grant the stream stays open and ends with an ErrNotHeld
	// frame when the lock goes away (released, hold TTL, session end, node
	// deleted): the client's Lost() signal.
	//
	// Re-attaching (after a failover or reconnection): Node set to the
	// request node. Granted at once when the request holds, Queued when it
	// waits, ErrNotHeld when the request is gone or not the session's.
	MsgLock
	// MsgLockRelease releases (or withdraws) the lock request Node.
	MsgLockRelease
	// MsgLockRenew extends Node's hold TTL. Request: Node, and optionally
	// HoldTTLMillis (a new hold TTL) and TTLMillis (a new TTL for the
	// session, clamped into the server's bounds). Response: TTLMillis.
	MsgLockRenew
	// MsgCheckSequencer asks whether Sequencer still holds its lock.
	// Response: Valid.
	MsgCheckSequencer
	// MsgLockQueue lists the lock requests on Path in queue order, the
	// granted ones first, phantoms (lock-delay) included. Request: Path,
	// Stale. Response: Locks, More (the list was cut), Rev.
	MsgLockQueue

	msgTypeEnd // keep last: one past the highest type of the first list
)

// Message types added later carry explicit values (ranges are assigned per
// area so that parallel work never collides).
const (
	// MsgLockNotices opens the connection's lock notices stream (at most
	// one per connection; it takes no request slot). A MsgLock stream ends
	// at the grant: a held lock is no request in flight. The server then
	// follows the held lock for the connection that was granted it (or
	// that re-attached to it last) and, when it goes away (lost, deleted,
	// or released by a MsgLockRelease of another connection: a release
	// the connection asked for itself is answered, not noticed), sends one
	// frame on this stream: Lock=LockGone, Node, Message (why). Notices
	// for a connection wait for its stream, at most one per lock it was
	// granted. The first frame (no Lock) acknowledges the stream. After a reconnection the client re-attaches
	// to its held locks (MsgLock with Node) on the new connection.
	MsgLockNotices MsgType = 40
	// MsgLockCall is MsgLock as a unary request (only to a server whose
	// Hello answer has FeatureLockCall), so that it can ride the mux
	// stream: most locks are free, and a grant then costs no stream of
	// its own. Request: MsgLock's, without Node (re-attaching is MsgLock)
	// and TimeoutMillis (nothing waits). Response: Lock=LockGranted with
	// Token, Node and Rev when the request was granted at once; else
	// Lock=LockQueued with Node and Rev: the request waits in the queue,
	// and the client follows it with MsgLock{Node} on a stream of its own
	// (withdrawing it, MsgLockRelease, if it gives up first). The server
	// follows a granted lock for the connection as after MsgLock, and
	// withdraws a request whose call was cancelled before the answer.
	MsgLockCall MsgType = 41

	// MsgLockHistory lists the recorded grants and ends of the locks on
	// Path (and below it with Recursive), newest first, at most Limit (0:
	// all the window holds). Request: Path, Recursive, Limit, Stale.
	// Response: LockHistory, Rev.
	MsgLockHistory MsgType = 55
)

// Txn messages (70-74 are the txn workstream's).
const (
	// MsgTxn is a conditional transaction, decided in one command: when
	// every one of Compares holds, Ops (then) run, else Else, all or
	// nothing. Ops are OpCreate, OpSet, OpDelete, OpCheck or OpGet.
	// Response: Succeeded (then ran), Results (one per op of the branch
	// that ran; a get's has Data and Stat; on failure Code is the failing
	// op's code, only its entry is set), Rev.
	MsgTxn MsgType = 70
)

// Client cache messages (80-82), only to a server whose Hello answer has
// FeatureCache.
const (
	// MsgCache opens the connection's cache stream (at most one per
	// connection, on the leader; it takes no request slot). The first
	// frame acknowledges it (TTLMillis: the cache lease). Then the server
	// sends invalidations (Names: the paths to drop, Rev: the
	// invalidation's sequence number on the stream) and lease grants
	// (TTLMillis, no Names), in order; the client writes MsgCacheAck and
	// MsgCacheRenew requests on the same stream. Ending the stream, from
	// either side, drops every registration: the client must drop its
	// whole cache.
	MsgCache MsgType = 80
	// MsgCacheAck (on the cache stream): every invalidation up to FromRev
	// was applied to the client's cache.
	MsgCacheAck MsgType = 81
	// MsgCacheRenew (on the cache stream): renew the cache lease. The
	// leader confirms its leadership and answers with a lease grant after
	// every invalidation it sent before it.
	MsgCacheRenew MsgType = 82
)

// Mux messages (60-61), only to a server whose Hello answer has
// FeatureMux.
const (
	// MsgMux opens the connection's mux stream: the stream stays open and
	// carries unary requests and their answers, each frame naming its call
	// (Request.Call, Response.Call, ids chosen by the client, never 0 and
	// never reused on the connection), answers in any order. Streaming
	// types are refused there. An answer without a call id is the
	// server's answer to the stream itself (ErrBusy): the stream is over.
	// A connection has one mux stream; a new one replaces the old.
	MsgMux MsgType = 60
	// MsgCancel, on the mux stream: the client gave up on call Call. The
	// server cancels its handler and sends no answer; a cancel of a call
	// already answered is ignored.
	MsgCancel MsgType = 61
)

// ACL messages (50-54 are the acl workstream's). Served by the leader:
// rule changes go through the log.
const (
	// MsgACL lists the replicated ACL rules. Response: ACL (Enforced,
	// Default, Rules). Anyone may list them: rules name identities and
	// prefixes, never data (ZooKeeper's getACL leaked password digests;
	// latch keeps no secrets in rules).
	MsgACL MsgType = 50
	// MsgACLSet sets rules (Request: ACL), MsgACLRemove removes them by
	// identity and prefix; the caller needs admin on every prefix.
	// Response: Rev.
	MsgACLSet    MsgType = 51
	MsgACLRemove MsgType = 52
)

var msgTypeNames = [...]string{
	MsgInvalid:        "Invalid",
	MsgHello:          "Hello",
	MsgOpenSession:    "OpenSession",
	MsgResumeSession:  "ResumeSession",
	MsgCloseSession:   "CloseSession",
	MsgKeepAlive:      "KeepAlive",
	MsgCreate:         "Create",
	MsgGet:            "Get",
	MsgSet:            "Set",
	MsgDelete:         "Delete",
	MsgStat:           "Stat",
	MsgExists:         "Exists",
	MsgChildren:       "Children",
	MsgMulti:          "Multi",
	MsgSync:           "Sync",
	MsgWatch:          "Watch",
	MsgSessions:       "Sessions",
	MsgMembers:        "Members",
	MsgStatus:         "Status",
	MsgLock:           "Lock",
	MsgLockRelease:    "LockRelease",
	MsgLockRenew:      "LockRenew",
	MsgCheckSequencer: "CheckSequencer",
	MsgLockQueue:      "LockQueue",
	MsgLockNotices:    "LockNotices",
	MsgLockCall:       "LockCall",
	MsgLockHistory:    "LockHistory",
	MsgACL:            "ACL",
	MsgACLSet:         "ACLSet",
	MsgACLRemove:      "ACLRemove",
	MsgMux:            "Mux",
	MsgCancel:         "Cancel",
	MsgTxn:            "Txn",
	MsgCache:          "Cache",
	MsgCacheAck:       "CacheAck",
	MsgCacheRenew:     "CacheRenew",
}

// String returns the type's name, for logs and metrics labels.
func (t MsgType) String() string {
	if int(t) < len(msgTypeNames) && msgTypeNames[t] != "" {
		return msgTypeNames[t]
	}
	return "Unknown"
}

// Valid reports whether t is a type this version understands.
func (t MsgType) Valid() bool {
	return t > MsgInvalid && int(t) < len(msgTypeNames) && msgTypeNames[t] != ""
}

// Streaming reports whether the server answers t with a sequence of frames
// instead of exactly one.
func (t MsgType) Streaming() bool {
	return t == MsgWatch || t == MsgLock || t == MsgLockNotices || t == MsgCache
}

// IsRead reports whether t only reads the namespace, so Stale may apply.
func (t MsgType) IsRead() bool {
	switch t {
	case MsgGet, MsgStat, MsgExists, MsgChildren, MsgLockQueue, MsgLockHistory:
		return true
	}
	return false
}
