package session

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test must close what it opens: a goroutine left behind by a
// listener, connection or stream fails the package.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
