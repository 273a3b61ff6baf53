package bench

import "errors"

// Errors returned by the benchmark runner. Match them with errors.Is.
var (
	// ErrBadConfig: a Config field makes no sense; the message names it.
	ErrBadConfig = errors.New("latch: bad bench config")
	// ErrNotLoopback: an endpoint or the admin address is not a loopback
	// address and Config.AllowRemote is off.
	ErrNotLoopback = errors.New("latch: bench: not a loopback address")
	// ErrNoAdmin: the leader's admin HTTP address is unknown (members
	// report none); give it with Config.Admin (--admin).
	ErrNoAdmin = errors.New("latch: bench: leader admin address unknown")
	// ErrAdminNotLeader: the admin address the sessions scenario would
	// measure (Config.Admin, or the one the member list gives) is not the
	// leader's.
	ErrAdminNotLeader = errors.New("latch: bench: admin address is not the leader's")
	// ErrMetrics: the leader's /metrics could not be read or lacks a
	// series the sessions scenario needs.
	ErrMetrics = errors.New("latch: bench: leader metrics")
	// ErrLeaderChanged: leadership moved during the sessions scenario's
	// measurement, so its leader figures would mix two processes.
	ErrLeaderChanged = errors.New("latch: bench: leader changed during the measurement")
	// ErrSessionsLost: sessions ended while the sessions scenario held
	// them.
	ErrSessionsLost = errors.New("latch: bench: sessions lost while held")
)
