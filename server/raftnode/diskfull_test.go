package raftnode

import (
	"errors"
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/latch-io/latch/session"
)

// recGauge records the last value a guard set.
type recGauge struct {
	prometheus.Gauge
	v   float64
	set bool
}

func (g *recGauge) Set(v float64) { g.v, g.set = v, true }

// A disk below the reserve refuses proposals with ErrNoSpace, raises the
// gauge and holds the FSM until the member stops; one above it does none
// of that. The guard works on a data dir alone, without a member.
func TestDiskGuardReserve(t *testing.T) {
	stop := make(chan struct{})
	gauge := &recGauge{}
	full := NewDiskGuard(DiskGuardConfig{Dir: t.TempDir(), MinFree: math.MaxInt64, Log: discardLogger(), NoSpace: gauge, Stop: stop})
	if err := full.Refuse(); err != nil {
		t.Fatalf("refused before it looked at the disk: %v", err)
	}
	full.Check()
	if err := full.Refuse(); !errors.Is(err, session.ErrNoSpace) {
		t.Fatalf("below the reserve: Refuse = %v, want ErrNoSpace", err)
	}
	if !gauge.set || gauge.v != 1 {
		t.Fatalf("no-space gauge = %v (set %v), want 1", gauge.v, gauge.set)
	}
	waited := make(chan bool)
	go func() { waited <- full.Wait() }()
	close(stop)
	if <-waited {
		t.Fatal("Wait on a full disk returned true when the member stopped; want false (apply nothing)")
	}

	room := &recGauge{}
	ok := NewDiskGuard(DiskGuardConfig{Dir: t.TempDir(), MinFree: 1, Log: discardLogger(), NoSpace: room, Stop: make(chan struct{})})
	ok.Check()
	if err := ok.Refuse(); err != nil {
		t.Fatalf("above the reserve: Refuse = %v", err)
	}
	if room.set {
		t.Fatalf("gauge set to %v with the disk never full", room.v)
	}
	if !ok.Wait() {
		t.Fatal("Wait with space returned false")
	}
}
