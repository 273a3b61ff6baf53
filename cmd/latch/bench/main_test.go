package bench

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/latch-io/latch/server/proc"
)

// The cluster test runs latchd processes built once per test process; a
// run must leave no goroutine of its own behind (every client closed).
func TestMain(m *testing.M) {
	code := m.Run()
	proc.RemoveBuild()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
			code = 1
		}
	}
	os.Exit(code)
}
