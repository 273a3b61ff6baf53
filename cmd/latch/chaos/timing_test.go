package chaos

import (
	"testing"

	"github.com/latch-io/latch/server"
)

// The checkers' election slack assumes the members run latchd's default
// raft timing (proc passes no timing flags).
func TestElectionTimeoutIsLatchdDefault(t *testing.T) {
	if def := server.DefaultConfig().ElectionTimeout; electionTimeout != def {
		t.Fatalf("chaos assumes election timeout %v, latchd's default is %v", electionTimeout, def)
	}
}
