package chaos

import (
	"context"
	"testing"
	"time"
)

// TestChaosTwoCells kills the chaos cell's leader again and again while
// the steady cell serves a routing client: every checker of the chaos cell
// passes, and the cells checker finds every operation of the steady cell
// succeeded during the kills and its data in its own cell only.
func TestChaosTwoCells(t *testing.T) {
	cfg := testConfig(t)
	cfg.Cells = 2
	cfg.Workloads, cfg.Workers = []string{WorkloadLocks, WorkloadKV}, 3
	cfg.Faults = []FaultKind{FaultLeaderKill, FaultLeaderKill}
	cfg.FaultInterval, cfg.Rounds = time.Second, 2
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	defer logReport(t, rep, cfg.Out)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if rep.Faults[FaultLeaderKill] < 2 {
		t.Fatalf("leader kills: %d", rep.Faults[FaultLeaderKill])
	}
	var cells *Verdict
	for i, v := range rep.Verdicts {
		if v.Status == StatusFail {
			t.Errorf("checker %s: %s (%s)", v.Checker, v.Status, v.Summary)
		}
		if v.Checker == CheckCells {
			cells = &rep.Verdicts[i]
		}
	}
	if cells == nil || cells.Status != StatusPass {
		t.Fatalf("cells checker: %+v", cells)
	}
}

// TestChaosMisrouteIsCaught: the steady cell's client routes its paths to
// the chaos cell (the planted bug) and the cells checker fails the run.
func TestChaosMisrouteIsCaught(t *testing.T) {
	cfg := testConfig(t)
	cfg.Cells, cfg.InjectBug = 2, BugMisroute
	cfg.Workloads, cfg.Workers = []string{WorkloadKV}, 1
	cfg.Faults, cfg.Duration, cfg.Rogue = nil, 3*time.Second, false
	runCaught(t, cfg, ViolationMisrouted)
}
