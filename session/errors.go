package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/latch-io/latch/namespace"
)

// Errors of the session layer. Errors of the namespace (ErrNoNode, ...) are
// namespace's own sentinels: they cross the wire as a Code and come back as
// the same sentinel, so errors.Is works the same on the client and on the
// server. ErrSessionExpired is namespace's sentinel so that an expiry
// decided in the state machine and one reported by the lease table are the
// same error.
var (
	ErrSessionExpired = namespace.ErrSessionExpired

	ErrNotLeader       = errors.New("latch: not the leader")
	ErrNoLeader        = errors.New("latch: no leader")
	ErrUnknownSession  = errors.New("latch: unknown session")
	ErrBadSecret       = errors.New("latch: bad session secret")
	ErrVersion         = errors.New("latch: unsupported protocol version")
	ErrFrameTooLarge   = errors.New("latch: frame too large")
	ErrMalformed       = errors.New("latch: malformed message")
	ErrUnknownType     = errors.New("latch: unknown message type")
	ErrTooManyWatches  = errors.New("latch: too many watches")
	ErrTooManySessions = errors.New("latch: too many sessions")
	ErrTimeout         = errors.New("latch: timeout")
	ErrCanceled        = errors.New("latch: canceled")
	// ErrBusy: the connection has as many requests in flight as the
	// server serves at once; retry when some have finished.
	ErrBusy = errors.New("latch: server busy")
	// ErrUnknownOutcome: a write was sent but its answer never came (the
	// leader lost leadership while committing it, or the connection broke):
	// it may or may not have been applied. Read the state to find out.
	ErrUnknownOutcome = errors.New("latch: write outcome unknown: it may or may not have been applied")
	// ErrWouldDeadlock is decided by the state machine; one identity end to end.
	ErrWouldDeadlock = namespace.ErrWouldDeadlock
	ErrNotHeld       = errors.New("latch: lock not held")
	// ErrLocked: a try-lock found the lock held or queued for.
	// It is decided by the state machine; one identity end to end.
	ErrLocked = namespace.ErrLocked
	// ErrNoSpace: the leader's disk is (nearly) full, so it refuses
	// writes; reads still work. Writes resume once space is freed.
	ErrNoSpace      = errors.New("latch: no space left on the leader's disk: writes are refused until space is freed")
	ErrInternal     = errors.New("latch: internal error")
	ErrUnknownCode  = errors.New("latch: unknown error code")
	ErrStreamClosed = errors.New("latch: stream closed")
	ErrBadConfig    = errors.New("latch: bad transport config")
	ErrBadCert      = errors.New("latch: bad certificate")

	// Errors of the HTTP/JSON API (server/httpapi).

	// ErrNoRoute: the HTTP API has no such route; see GET /api/v1/openapi.json.
	ErrNoRoute = errors.New("latch: no such API route")
	// ErrMethodNotAllowed: the route exists but not with this HTTP method.
	ErrMethodNotAllowed = errors.New("latch: method not allowed on this route")
	// ErrNoElectionLeader: the election has no leader right now; campaign,
	// or observe it to learn when one is elected.
	ErrNoElectionLeader = errors.New("latch: election has no leader")

	// ErrWrongCell: the path belongs to another cell (its first component
	// names the cell) than the one this member serves; nothing was
	// applied. Send it to that cell's members (a client with a cell map
	// routes it there itself). See WrongCell.
	ErrWrongCell = errors.New("latch: path belongs to another cell")

	// Member traffic (the admin endpoint).

	// ErrAdminDenied: the request needs a member certificate or an admin
	// identity (latchd --admins) from the cluster CA, and the caller had
	// neither. Present one (latch cert client NAME; --admins NAME).
	ErrAdminDenied = errors.New("latch: admin request denied")
	// ErrMemberExists: a join named the id or raft address of a live
	// member. Remove that member first, or have an admin ask to replace it.
	ErrMemberExists = errors.New("latch: member exists")
	// ErrSnapshotTooSoon: a snapshot was asked for within the minimum
	// interval of the last one; retry after it.
	ErrSnapshotTooSoon = errors.New("latch: snapshot asked for too soon after the last one")

	// ErrBehind: a Stale read or watch asked for a revision (MinRev) this
	// member has not applied yet, and it did not catch up within a
	// moment. Nothing was read; ask another member or the leader.
	ErrBehind = errors.New("latch: member is behind the revision asked for")
)

// Code is an error's number on the wire. Values are part of the protocol:
// add new ones, never renumber.
type Code uint16

// Wire error codes. CodeOK is success.
const (
	CodeOK Code = 0

	// Namespace errors.
	CodeNoNode          Code = 1
	CodeNodeExists      Code = 2
	CodeBadVersion      Code = 3
	CodeNotEmpty        Code = 4
	CodeBadPath         Code = 5
	CodeDataTooLarge    Code = 6
	CodeEphemeralParent Code = 7
	CodeNoSession       Code = 8
	CodeTooManyOps      Code = 9
	CodeRootImmutable   Code = 10
	CodeBadCommand      Code = 11
	CodeNoMember        Code = 12
	CodeClosed          Code = 13 // the member is shutting down: try another

	// Session and transport errors.
	CodeNotLeader       Code = 20
	CodeNoLeader        Code = 21
	CodeSessionExpired  Code = 22
	CodeUnknownSession  Code = 23
	CodeBadSecret       Code = 24
	CodeVersion         Code = 25
	CodeFrameTooLarge   Code = 26
	CodeMalformed       Code = 27
	CodeUnknownType     Code = 28
	CodeTooManyWatches  Code = 29
	CodeTooManySessions Code = 30
	CodeTimeout         Code = 31
	CodeCanceled        Code = 32
	CodeBusy            Code = 33
	CodeUnknownOutcome  Code = 34

	// Lock errors.
	CodeWouldDeadlock Code = 40
	CodeNotHeld       Code = 41
	CodeLocked        Code = 42

	// Storage errors (105-109 are the integrity workstream's).
	CodeNoSpace Code = 105

	// ACL errors (120-124 are the acl workstream's).
	CodePermissionDenied Code = 120
	CodeReservedName     Code = 121
	CodeBadRule          Code = 122

	CodeInternal Code = 99

	// Limits errors (110–114).
	CodeTooManyLockRequests Code = 110
	CodeBadRequestID        Code = 111

	// HTTP API errors (130–134).
	CodeNoRoute          Code = 130
	CodeMethodNotAllowed Code = 131
	CodeNoElectionLeader Code = 132

	// Cells errors (140–144).
	CodeWrongCell Code = 140

	// Read errors (150–154).
	CodeBehind Code = 150

	// Member traffic (115–119).
	CodeAdminDenied     Code = 115
	CodeMemberExists    Code = 116
	CodeSnapshotTooSoon Code = 117
)

// codeTable pairs every code with the sentinel it stands for. CodeOf walks
// it in order, so a more specific sentinel must precede one it wraps.
var codeTable = []struct {
	code Code
	err  error
	name string
}{
	{CodeNoNode, namespace.ErrNoNode, "NoNode"},
	{CodeNodeExists, namespace.ErrNodeExists, "NodeExists"},
	{CodeBadVersion, namespace.ErrBadVersion, "BadVersion"},
	{CodeNotEmpty, namespace.ErrNotEmpty, "NotEmpty"},
	{CodeBadPath, namespace.ErrBadPath, "BadPath"},
	{CodeDataTooLarge, namespace.ErrDataTooLarge, "DataTooLarge"},
	{CodeEphemeralParent, namespace.ErrEphemeralParent, "EphemeralParent"},
	{CodeNoSession, namespace.ErrNoSession, "NoSession"},
	{CodeTooManyOps, namespace.ErrTooManyOps, "TooManyOps"},
	{CodeRootImmutable, namespace.ErrRootImmutable, "RootImmutable"},
	{CodeBadCommand, namespace.ErrBadCommand, "BadCommand"},
	{CodeNoMember, namespace.ErrNoMember, "NoMember"},
	{CodeClosed, namespace.ErrClosed, "Closed"},
	{CodeNotLeader, ErrNotLeader, "NotLeader"},
	{CodeNoLeader, ErrNoLeader, "NoLeader"},
	{CodeSessionExpired, ErrSessionExpired, "SessionExpired"},
	{CodeUnknownSession, ErrUnknownSession, "UnknownSession"},
	{CodeBadSecret, ErrBadSecret, "BadSecret"},
	{CodeVersion, ErrVersion, "Version"},
	{CodeFrameTooLarge, ErrFrameTooLarge, "FrameTooLarge"},
	{CodeMalformed, ErrMalformed, "Malformed"},
	{CodeUnknownType, ErrUnknownType, "UnknownType"},
	{CodeTooManyWatches, ErrTooManyWatches, "TooManyWatches"},
	{CodeTooManySessions, ErrTooManySessions, "TooManySessions"},
	{CodeTimeout, ErrTimeout, "Timeout"},
	{CodeCanceled, ErrCanceled, "Canceled"},
	{CodeBusy, ErrBusy, "Busy"},
	{CodeUnknownOutcome, ErrUnknownOutcome, "UnknownOutcome"},
	{CodeWouldDeadlock, ErrWouldDeadlock, "WouldDeadlock"},
	{CodeNotHeld, ErrNotHeld, "NotHeld"},
	{CodeLocked, ErrLocked, "Locked"},
	{CodeTooManyLockRequests, namespace.ErrTooManyLockRequests, "TooManyLockRequests"},
	{CodeBadRequestID, namespace.ErrBadRequestID, "BadRequestID"},
	{CodeNoRoute, ErrNoRoute, "NoRoute"},
	{CodeMethodNotAllowed, ErrMethodNotAllowed, "MethodNotAllowed"},
	{CodeNoElectionLeader, ErrNoElectionLeader, "NoElectionLeader"},
	{CodeWrongCell, ErrWrongCell, "WrongCell"},
	{CodeBehind, ErrBehind, "Behind"},
	{CodePermissionDenied, namespace.ErrPermissionDenied, "PermissionDenied"},
	{CodeReservedName, namespace.ErrReservedName, "ReservedName"},
	{CodeBadRule, namespace.ErrBadRule, "BadRule"},
	{CodeNoSpace, ErrNoSpace, "NoSpace"},
	{CodeInternal, ErrInternal, "Internal"},
	{CodeAdminDenied, ErrAdminDenied, "AdminDenied"},
	{CodeMemberExists, ErrMemberExists, "MemberExists"},
	{CodeSnapshotTooSoon, ErrSnapshotTooSoon, "SnapshotTooSoon"},
}

// Error is an error received from (or destined for) the wire. It unwraps to
// the sentinel of its Code, so errors.Is(err, namespace.ErrNoNode) holds on
// the client exactly as it did on the server.
type Error struct {
	Code    Code
	Message string // the server's message, e.g. "latch: no node: /a/b"
	// Leader is the leader's client address carried by ErrNotLeader
	// ("" when unknown).
	Leader string

	sentinel error
}

// Error returns the server's message, or the sentinel's when there is none.
func (e *Error) Error() string {
	if e.Message != "" {
		return e.Message
	}
	return e.sentinel.Error()
}

// Unwrap returns the sentinel error of e.Code.
func (e *Error) Unwrap() error { return e.sentinel }

// NotLeader returns an ErrNotLeader error that tells the client where the
// leader is (leader may be "" when none is known).
func NotLeader(leader string) error {
	return &Error{Code: CodeNotLeader, Leader: leader, sentinel: ErrNotLeader,
		Message: fmt.Sprintf("%v (leader %q)", ErrNotLeader, leader)}
}

// Err turns a wire code and message into an error: nil for CodeOK, an *Error
// matching the code's sentinel, or, for a code this version does not know,
// an error wrapping ErrUnknownCode with the number and message.
func (c Code) Err(msg string) error {
	if c == CodeOK {
		return nil
	}
	for i := range codeTable {
		if codeTable[i].code == c {
			return &Error{Code: c, Message: msg, sentinel: codeTable[i].err}
		}
	}
	return fmt.Errorf("%w %d: %s", ErrUnknownCode, uint16(c), msg)
}

// String returns the code's name ("NoNode"), or its number when unknown.
func (c Code) String() string {
	if c == CodeOK {
		return "OK"
	}
	for i := range codeTable {
		if codeTable[i].code == c {
			return codeTable[i].name
		}
	}
	return fmt.Sprintf("Code(%d)", uint16(c))
}

// CodeOf returns the wire code for err: CodeOK for nil, the code of the
// first sentinel err matches, CodeTimeout and CodeCanceled for the context
// errors, and CodeInternal for anything else.
func CodeOf(err error) Code {
	if err == nil {
		return CodeOK
	}
	var e *Error
	if asError(err, &e) {
		return e.Code
	}
	for i := range codeTable {
		if errors.Is(err, codeTable[i].err) {
			return codeTable[i].code
		}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return CodeTimeout
	case errors.Is(err, context.Canceled):
		return CodeCanceled
	}
	return CodeInternal
}

func asError(err error, target **Error) bool { return errors.As(err, target) }
