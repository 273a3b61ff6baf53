package client

import (
	"errors"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// Errors returned by the client. Errors the server returns cross the wire
// as a code and come back as the very sentinel the server matched, so
// errors.Is(err, client.ErrNoNode) holds for a server's "no node" exactly
// as namespace.ErrNoNode does inside the server.
var (
	// Namespace errors.
	ErrNoNode          = namespace.ErrNoNode
	ErrNodeExists      = namespace.ErrNodeExists
	ErrBadVersion      = namespace.ErrBadVersion
	ErrNotEmpty        = namespace.ErrNotEmpty
	ErrBadPath         = namespace.ErrBadPath
	ErrDataTooLarge    = namespace.ErrDataTooLarge
	ErrEphemeralParent = namespace.ErrEphemeralParent
	ErrNoSession       = namespace.ErrNoSession
	ErrTooManyOps      = namespace.ErrTooManyOps
	ErrRootImmutable   = namespace.ErrRootImmutable
	// ErrPermissionDenied: the ACL rules do not give this client's
	// identity the right it needs, or the node belongs to another session
	// (lock, election and semaphore nodes, any ephemeral). The message
	// names the identity, the right and the path; an admin grants rights
	// with `latch acl set`.
	ErrPermissionDenied = namespace.ErrPermissionDenied
	// ErrReservedName: lock-x-NNNNNNNNNN and lock-s-NNNNNNNNNN are lock
	// request names; create them with Lock, never by hand.
	ErrReservedName = namespace.ErrReservedName
	// ErrBadRule: an ACL rule that cannot be set (bad prefix or identity),
	// or a change that would leave the tree without an admin of /.
	ErrBadRule = namespace.ErrBadRule

	// Session and transport errors.
	ErrSessionExpired = session.ErrSessionExpired
	ErrNotLeader      = session.ErrNotLeader
	ErrNoLeader       = session.ErrNoLeader
	// ErrNoSpace: the cluster's leader refuses writes because its disk is
	// (nearly) full; retry once an operator freed space.
	ErrNoSpace         = session.ErrNoSpace
	ErrUnknownSession  = session.ErrUnknownSession
	ErrBadSecret       = session.ErrBadSecret
	ErrVersion         = session.ErrVersion
	ErrFrameTooLarge   = session.ErrFrameTooLarge
	ErrMalformed       = session.ErrMalformed
	ErrUnknownType     = session.ErrUnknownType
	ErrTooManyWatches  = session.ErrTooManyWatches
	ErrTooManySessions = session.ErrTooManySessions
	ErrTimeout         = session.ErrTimeout
	ErrCanceled        = session.ErrCanceled
	ErrWouldDeadlock   = session.ErrWouldDeadlock
	ErrNotHeld         = session.ErrNotHeld
	ErrLocked          = session.ErrLocked
	ErrInternal        = session.ErrInternal
	ErrUnknownCode     = session.ErrUnknownCode
	ErrBadCert         = session.ErrBadCert
	// ErrBehind: the member asked for a Stale read had not applied the
	// newest revision this client has seen. The client retries such a read
	// on another member or the leader itself; it reaches the caller only
	// when ctx ended first.
	ErrBehind = session.ErrBehind

	// The client's own errors.
	ErrClosed        = errors.New("latch: client closed")
	ErrSessionClosed = errors.New("latch: session closed")
	ErrBadConfig     = errors.New("latch: bad client config")
	ErrBadOption     = errors.New("latch: bad option")
	// ErrNotCounter: a Counter's node holds data that is not a counter.
	ErrNotCounter = errors.New("latch: not a counter")
	// ErrUnknownOutcome: a write was sent and its answer never came — the
	// connection broke, or the leader lost leadership while committing it —
	// so it may or may not have been applied. Read the state to find out;
	// the client never resends such a write, because doing so could apply
	// it twice.
	ErrUnknownOutcome = session.ErrUnknownOutcome
	// ErrNoEndpoint: no endpoint could be reached before ctx ended.
	ErrNoEndpoint = errors.New("latch: no endpoint reachable")
	// ErrNotListening: nothing listens on any endpoint (each refused for
	// a second) and the client never connected: is latchd running, and
	// are the endpoints right? The message names them.
	ErrNotListening = errors.New("latch: nothing listening")
	// ErrUntrusted: the member's certificate is not signed by a CA the
	// client trusts (Config.TLS's RootCAs; the CLI's --ca), or does not
	// name the address dialed. Retrying cannot help.
	ErrUntrusted = errors.New("latch: server certificate not trusted")
	// ErrCertRequired: the member requires a client certificate signed by
	// a CA it trusts and got none, or one it refused (the CLI's --cert and
	// --key). Retrying cannot help.
	ErrCertRequired = errors.New("latch: the server requires a client certificate it trusts")

	// Lock recipes (mutex.go, election.go, semaphore.go).

	// ErrLockLost: a lock this client held (or was just granted) is not
	// held any more, or cannot be trusted to be: the server took it away
	// (hold TTL, node deleted), the session ended, or the grant arrived
	// after the session's lease had run out.
	ErrLockLost = errors.New("latch: lock lost")
	// ErrNoElectionLeader: the election has no leader right now.
	ErrNoElectionLeader = session.ErrNoElectionLeader
)
