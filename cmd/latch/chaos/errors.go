package chaos

import "errors"

// Errors returned by the chaos runner. Match them with errors.Is.
var (
	ErrBadConfig = errors.New("latch: bad chaos config")
	// ErrViolations is returned by Run when a checker found a violation;
	// the report names each.
	ErrViolations = errors.New("latch: chaos: violations found")
	// ErrSetup means the cluster, the store or the workers could not be
	// started: nothing was checked.
	ErrSetup = errors.New("latch: chaos: setup failed")
	// ErrBadHistory means a history file does not parse.
	ErrBadHistory = errors.New("latch: chaos: bad history")
)
