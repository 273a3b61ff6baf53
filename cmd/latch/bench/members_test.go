package bench

import (
	"strings"
	"testing"
	"time"
)

// TestMemberLoadFigures: a member's figures are the differences of its
// counters over the time between the samples, and the throttled share is
// of the periods its group ran in, not of all of them.
func TestMemberLoadFigures(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := &memberProbe{
		load:   MemberLoad{ID: "n2", Role: roleFollower},
		budget: cpuBudget{cores: 0.25}, capped: true,
		before: memberSample{at: t0, cpuSeconds: 10, reads: 500, periods: 100, throttled: 10},
	}
	l := p.loadTo(memberSample{at: t0.Add(2 * time.Second), cpuSeconds: 10.5, reads: 10500, periods: 300, throttled: 190})
	if l.ID != "n2" || l.Role != roleFollower || l.Reads != 10000 || l.ReadsPerSec != 5000 || l.CPUPercent != 25 {
		t.Errorf("load %+v: want 10000 reads, 5000/s, 25%% of a core", l)
	}
	if l.CPUMicrosPerRead == nil || *l.CPUMicrosPerRead != 50 {
		t.Errorf("CPU per read %v, want 50 µs", l.CPUMicrosPerRead)
	}
	if l.BudgetPercent != 25 || l.ThrottledPercent == nil || *l.ThrottledPercent != 90 {
		t.Errorf("budget %v%%, throttled %v; want 25%% and 90%% of periods", l.BudgetPercent, l.ThrottledPercent)
	}

	// No budget, no reads: no per-read figure, no throttling.
	p = &memberProbe{load: MemberLoad{ID: "n1", Role: roleLeader}, before: memberSample{at: t0, cpuSeconds: 1, reads: 7}}
	l = p.loadTo(memberSample{at: t0.Add(time.Second), cpuSeconds: 1.1, reads: 7})
	if l.Reads != 0 || l.CPUMicrosPerRead != nil || l.BudgetPercent != 0 || l.ThrottledPercent != nil {
		t.Errorf("idle uncapped member: %+v", l)
	}
	if l.CPUPercent < 9.99 || l.CPUPercent > 10.01 {
		t.Errorf("CPU %v%%, want 10", l.CPUPercent)
	}

	var b strings.Builder
	(&Report{Scenario: ScenarioStaleGet, Members: []MemberLoad{l, p.loadTo(memberSample{at: t0.Add(time.Second), cpuSeconds: 1.1, reads: 107})}}).WriteTable(&b)
	for _, want := range []string{"MEMBER", "n1  ", "leader", "100", "all"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
