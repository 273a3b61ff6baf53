package namespace

import "fmt"

// Limits bound what a single command may carry. Every member of a cluster
// must use the same Limits: they decide which commands fail, so differing
// limits would make replicas diverge.
type Limits struct {
	MaxPathBytes    int // longest path in bytes (default 1024)
	MaxDepth        int // most path components (default 64)
	MaxDataBytes    int // largest node data (default 64 KiB)
	MaxMultiOps     int // most ops in one OpMulti (default 128)
	MaxChildrenPage int // most names one Children call returns (default 1000)

	// MaxLockBatch is the most lock grants, and the most lock timers, one
	// command processes (default 1000); the rest follow on the next command
	// (NextTimer asks for a tick at once). It keeps a release that frees
	// thousands of readers inside one badger transaction.
	MaxLockBatch int
	// DefaultLockDelayMillis is the lock-delay of a request that names
	// none (default 5000): how long a lock whose holder was lost (session
	// expired, hold TTL passed) stays unavailable. 0 turns it off.
	DefaultLockDelayMillis int64
	// MaxLockDelayMillis caps the lock-delay a request may ask for
	// (default 60000, Chubby's bound).
	MaxLockDelayMillis int64
}

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
	case l.MaxLockDelayMillis < 0 || l.MaxLockDelayMillis > maxLockMillis:
		return fmt.Errorf("%w: MaxLockDelayMillis %d must be in [0, %d]", ErrBadLimits, l.MaxLockDelayMillis, maxLockMillis)
	case l.DefaultLockDelayMillis < 0 || l.DefaultLockDelayMillis > l.MaxLockDelayMillis:
		return fmt.Errorf("%w: DefaultLockDelayMillis %d must be in [0, MaxLockDelayMillis %d]",
			ErrBadLimits, l.DefaultLockDelayMillis, l.MaxLockDelayMillis)
	}
	return nil
}

// maxDataBytesCap keeps one node well inside a badger transaction; a request
// is capped at 1 MiB by DESIGN.md anyway.
const maxDataBytesCap = 1 << 20
