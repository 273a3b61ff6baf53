package namespace

import (
	"fmt"
)

// LockMode is how a request wants its lock: exclusive (the zero value) or
// shared.
type LockMode uint8

// Lock modes.
const (
	LockExclusive LockMode = iota
	LockShared
)

func (m LockMode) String() string {
	switch m {
	case LockExclusive:
		return "exclusive"
	case LockShared:
		return "shared"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// NoLockDelay in Command.LockDelayMillis asks for no lock-delay at all
// (0 means the Limits default).
const NoLockDelay int64 = -1

// Grant is one lock granted by a command.
type Grant struct {
	Node    string // the request node
	Path    string // the locked path
	Session uint64
	Token   uint64 // fencing token: the revision of the granting command
	Mode    LockMode
}

// LockInfo describes one lock request.
type LockInfo struct {
	Node            string // request node; for a phantom, the deleted node's path
	Path            string // the locked path
	Mode            LockMode
	Session         uint64
	Rev             uint64 // revision that created the request: the queue order
	HoldTTLMillis   int64  // 0: held until released
	LockDelayMillis int64  // the lock-delay that applies when the holder is lost
	Granted         bool
	Token           uint64 // fencing token, when granted
	GrantTime       int64  // leader time of the grant, unix ns
	Deadline        int64  // hold deadline, unix ns; 0: none
	// Phantom: the holder was lost and lock-delay keeps the lock
	// unavailable until DelayEnd (unix ns); the node is gone.
	Phantom  bool
	DelayEnd int64
}

// MaxLockMillis bounds hold TTLs and lock-delays (about 34 years), so that
// deadlines in unix nanoseconds cannot overflow.
const MaxLockMillis = 1 << 40
