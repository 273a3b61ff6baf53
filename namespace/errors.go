package namespace

import "errors"

// Errors returned by the namespace. Callers match them with errors.Is; the
// returned errors wrap them with the offending path or id.
var (
	ErrNoNode          = errors.New("latch: no node")
	ErrNodeExists      = errors.New("latch: node exists")
	ErrBadVersion      = errors.New("latch: version mismatch")
	ErrNotEmpty        = errors.New("latch: node has children")
	ErrBadPath         = errors.New("latch: bad path")
	ErrDataTooLarge    = errors.New("latch: data too large")
	ErrEphemeralParent = errors.New("latch: ephemeral nodes cannot have children")
	ErrNoSession       = errors.New("latch: no such session")
	ErrSessionExpired  = errors.New("latch: session expired") // for session layers; the namespace reports ErrNoSession
	ErrTooManyOps      = errors.New("latch: too many ops in multi")
	ErrMalformed       = errors.New("latch: malformed entry")
	ErrAlreadyApplied  = errors.New("latch: entry already applied")
	ErrRootImmutable   = errors.New("latch: root node cannot be deleted")
	ErrBadCommand      = errors.New("latch: bad command")
	ErrNoMember        = errors.New("latch: no such member")
	ErrBadLimits       = errors.New("latch: bad limits")
	ErrBadConfig       = errors.New("latch: bad namespace config")
	ErrBadSnapshot     = errors.New("latch: bad snapshot")
	ErrStorage         = errors.New("latch: storage failure")
	ErrClosed          = errors.New("latch: namespace store closed")
	ErrWouldDeadlock   = errors.New("latch: lock would deadlock: the session already holds or waits for a conflicting lock")
	// ErrLocked: a try-lock (Command.Try) found a conflicting request
	// held or queued, or lock-delay running.
	ErrLocked = errors.New("latch: lock is held by another")
	// ErrTooManyLockRequests: the session has MaxLockRequestsPerSession
	// live lock requests; release some, or spread them over sessions.
	ErrTooManyLockRequests = errors.New("latch: too many lock requests for one session (cluster setting max_lock_requests_per_session): release some or use another session")
	// ErrBadRequestID: a lock request id the session used for another
	// lock (path or mode); choose a new id for each lock request.
	ErrBadRequestID = errors.New("latch: lock request id already names another request of this session")
	ErrNoLock       = errors.New("latch: no such lock request")
	ErrNotLockOwner = errors.New("latch: lock request belongs to another session")
	ErrLockNotHeld  = errors.New("latch: lock not held")
	// ErrPermissionDenied: the identity's ACL rules do not grant the right
	// the operation needs, or the node belongs to another session.
	ErrPermissionDenied = errors.New("latch: permission denied")
	// ErrReservedName: lock request names are made by the lock code only.
	ErrReservedName = errors.New("latch: reserved name")
	// ErrBadRule: an ACL rule or rule change that cannot be applied.
	ErrBadRule = errors.New("latch: bad ACL rule")
)
