package namespace

import (
	"fmt"
)

// Limits are the cluster settings: every number that shapes what Apply
// decides (which commands fail, which grant, how long a lock-delay is).
// They are replicated (settings.go): OpSetLimits changes them through the
// log, so every member enforces the same limits at the same index. The
// tags are a storage format (log entries and the stored record): never
// change them; a new setting gets a new tag and a default in
// DefaultLimits.
type Limits struct {
	MaxPathBytes    int `codec:"path" json:"max_path_bytes"`    // longest path in bytes (default 1024)
	MaxDepth        int `codec:"depth" json:"max_depth"`        // most path components (default 64)
	MaxDataBytes    int `codec:"data" json:"max_data_bytes"`    // largest node data (default 64 KiB)
	MaxMultiOps     int `codec:"multi" json:"max_multi_ops"`    // most ops in one OpMulti (default 128)
	MaxChildrenPage int `codec:"page" json:"max_children_page"` // most names one Children call returns (default 1000)

	// MaxLockBatch is the most lock grants, and the most lock timers, one
	// command processes (default 1000); the rest follow on the next command
	// (NextTimer asks for a tick at once). It keeps a release that frees
	// thousands of readers inside one badger transaction.
	MaxLockBatch int `codec:"lockbatch" json:"max_lock_batch"`
	// DefaultLockDelayMillis is the lock-delay of a request that names
	// none (default 5000): how long a lock whose holder was lost (session
	// expired, hold TTL passed) stays unavailable. 0 turns it off.
	DefaultLockDelayMillis int64 `codec:"lockdelay" json:"default_lock_delay_ms"`
	// MaxLockDelayMillis caps the lock-delay a request may ask for
	// (default 60000, Chubby's bound).
	MaxLockDelayMillis int64 `codec:"maxlockdelay" json:"max_lock_delay_ms"`
	// LockHistoryMax is how many lock history records (grants and ends,
	// lockhistory.go) are kept (default 10000; 0 records none).
	LockHistoryMax int `codec:"ops_lockhist" json:"lock_history_max"`
	// LockHistoryMaxAgeMillis drops history records older than this, by
	// leader time (default 0: no age bound, only LockHistoryMax).
	LockHistoryMaxAgeMillis int64 `codec:"ops_lockhistage" json:"lock_history_max_age_ms"`
	// MaxLockRequestsPerSession bounds one session's live lock requests,
	// held and waiting (default 10000; 0: no bound, as in settings recorded
	// before it existed); one more fails with ErrTooManyLockRequests.
	MaxLockRequestsPerSession int `codec:"lk_maxsess" json:"max_lock_requests_per_session"`
	// MinSessionTTLMillis and MaxSessionTTLMillis bound session TTLs
	// (defaults 1 s and 600 s): the leader clamps a client's wish into
	// them when it opens the session (Apply records the TTL it was
	// given), so a change applies to sessions opened after it.
	MinSessionTTLMillis int64 `codec:"ttl_min" json:"min_session_ttl_ms"`
	MaxSessionTTLMillis int64 `codec:"ttl_max" json:"max_session_ttl_ms"`
}

// maxSessionTTLMillis caps MaxSessionTTLMillis at a day: a session the
// cluster keeps that long after its client vanished holds its locks that
// long.
const maxSessionTTLMillis = 24 * 3600 * 1000

// maxLockHistory caps LockHistoryMax: a history read scans the window.
const maxLockHistory = 1_000_000

// DefaultLimits returns the limits DESIGN.md names as defaults.
func DefaultLimits() Limits {
	return Limits{
		MaxPathBytes:    1024,
		MaxDepth:        64,
		MaxDataBytes:    64 << 10,
		MaxMultiOps:     128,
		MaxChildrenPage: 1000,

		MaxLockBatch:           1000,
		DefaultLockDelayMillis: 5000,
		MaxLockDelayMillis:     60000,

		LockHistoryMax: 10000,

		MaxLockRequestsPerSession: 10000,

		MinSessionTTLMillis: 1000,
		MaxSessionTTLMillis: 600_000,
	}
}

// Validate rejects limits that would make the namespace unusable.
func (l Limits) Validate() error {
	switch {
	case l.MaxPathBytes < 2:
		return fmt.Errorf("%w: MaxPathBytes %d must be at least 2", ErrBadLimits, l.MaxPathBytes)
	case l.MaxDepth < 1:
		return fmt.Errorf("%w: MaxDepth %d must be at least 1", ErrBadLimits, l.MaxDepth)
	case l.MaxDataBytes < 0:
		return fmt.Errorf("%w: MaxDataBytes %d must not be negative", ErrBadLimits, l.MaxDataBytes)
	case l.MaxDataBytes > maxDataBytesCap:
		return fmt.Errorf("%w: MaxDataBytes %d exceeds %d", ErrBadLimits, l.MaxDataBytes, maxDataBytesCap)
	case l.MaxMultiOps < 1:
		return fmt.Errorf("%w: MaxMultiOps %d must be at least 1", ErrBadLimits, l.MaxMultiOps)
	case l.MaxChildrenPage < 1:
		return fmt.Errorf("%w: MaxChildrenPage %d must be at least 1", ErrBadLimits, l.MaxChildrenPage)
	case l.MaxLockBatch < 1:
		return fmt.Errorf("%w: MaxLockBatch %d must be at least 1", ErrBadLimits, l.MaxLockBatch)
	case l.MaxLockDelayMillis < 0 || l.MaxLockDelayMillis > MaxLockMillis:
		return fmt.Errorf("%w: MaxLockDelayMillis %d must be in [0, %d]", ErrBadLimits, l.MaxLockDelayMillis, MaxLockMillis)
	case l.LockHistoryMax < 0 || l.LockHistoryMax > maxLockHistory:
		return fmt.Errorf("%w: LockHistoryMax %d must be in [0, %d]", ErrBadLimits, l.LockHistoryMax, maxLockHistory)
	case l.MaxLockRequestsPerSession < 0:
		return fmt.Errorf("%w: MaxLockRequestsPerSession %d must not be negative (0: no bound)", ErrBadLimits, l.MaxLockRequestsPerSession)
	case l.LockHistoryMaxAgeMillis < 0:
		return fmt.Errorf("%w: LockHistoryMaxAgeMillis %d must not be negative", ErrBadLimits, l.LockHistoryMaxAgeMillis)
	case l.MinSessionTTLMillis < 1:
		return fmt.Errorf("%w: MinSessionTTLMillis %d must be at least 1", ErrBadLimits, l.MinSessionTTLMillis)
	case l.MaxSessionTTLMillis < l.MinSessionTTLMillis || l.MaxSessionTTLMillis > maxSessionTTLMillis:
		return fmt.Errorf("%w: MaxSessionTTLMillis %d must be in [MinSessionTTLMillis %d, %d]",
			ErrBadLimits, l.MaxSessionTTLMillis, l.MinSessionTTLMillis, maxSessionTTLMillis)
	case l.DefaultLockDelayMillis < 0 || l.DefaultLockDelayMillis > l.MaxLockDelayMillis:
		return fmt.Errorf("%w: DefaultLockDelayMillis %d must be in [0, MaxLockDelayMillis %d]",
			ErrBadLimits, l.DefaultLockDelayMillis, l.MaxLockDelayMillis)
	}
	return nil
}

// maxDataBytesCap keeps one node well inside a badger transaction; a request
// is capped at 1 MiB by DESIGN.md anyway.
const maxDataBytesCap = 1 << 20

// OpSetLimits replaces the cluster settings with Command.Limits. When
// Command.Version is not AnyVersion it must equal the revision of the
// settings in force (0: never set through the log), or the command fails
// with ErrBadVersion: the first leader bootstraps with Version 0, so of two
// racing bootstraps only the first takes effect, and an operator's
// read-modify-write cannot undo a change it did not see.
const OpSetLimits Op = 15
