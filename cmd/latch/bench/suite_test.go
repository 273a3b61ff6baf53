package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/client"
)

// TestAllConfigs: `latch bench all` measures every row of the write-path
// targets with the parameters the targets name, and each config is valid.
func TestAllConfigs(t *testing.T) {
	base := Config{Client: client.Config{Endpoints: []string{"127.0.0.1:7420"}}, Ops: 100, Duration: time.Second, Prefix: "/x", Conns: 3}
	cfgs := AllConfigs(base)
	var got []string
	for _, c := range cfgs {
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", c.Scenario, err)
		}
		if c.Prefix != "" {
			t.Errorf("%s: shares the base prefix %q", c.Scenario, c.Prefix)
		}
		got = append(got, c.Scenario)
	}
	if want := "lock set watch contended set sessions"; strings.Join(got, " ") != want {
		t.Fatalf("scenarios %v, want %s", got, want)
	}
	if c := cfgs[3]; c.Concurrency != 64 || c.Conns != 64 || !c.RandomLock {
		t.Errorf("contended row %+v: want 64 clients on their own connections, random lock", c)
	}
	if c := cfgs[4]; c.Concurrency != 64 {
		t.Errorf("proposers row: %d goroutines, want 64", c.Concurrency)
	}
	if c := cfgs[5].withDefaults(); c.Sessions != DefaultSessions || c.Conns != c.Sessions {
		t.Errorf("sessions row: %d sessions on %d connections, want one connection each", c.Sessions, c.Conns)
	}
}

func TestSummaryNamesFailedRuns(t *testing.T) {
	var b strings.Builder
	WriteSummary(&b, []*Report{
		{Scenario: ScenarioSet, Concurrency: 1, Latency: []OpLatency{{Op: "set", Latency: Latency{P50: Millis(700 * time.Microsecond)}}}},
		{Scenario: ScenarioSessions, Failed: "latch: not the leader"},
	})
	out := b.String()
	if !strings.Contains(out, "set p50") || !strings.Contains(out, "0.700ms") || !strings.Contains(out, "FAILED: latch: not the leader") {
		t.Fatalf("summary:\n%s", out)
	}
}

// TestCompareTable: `latch bench all --baseline-endpoints` lists every
// round's figure of each row for both clusters on one line, the baseline
// first, and a row that failed on one side says so on that side only.
func TestCompareTable(t *testing.T) {
	set := func(p50 time.Duration) *Report {
		return &Report{Scenario: ScenarioSet, Concurrency: 1, Latency: []OpLatency{{Op: "set", Latency: Latency{P50: Millis(p50)}}}}
	}
	lock := func(acq, rel time.Duration) *Report {
		return &Report{Scenario: ScenarioLock, Latency: []OpLatency{
			{Op: "acquire", Latency: Latency{P50: Millis(acq)}}, {Op: "release", Latency: Latency{P50: Millis(rel)}}}}
	}
	failed := &Report{Scenario: ScenarioLock, Failed: "latch: no leader"}
	was := [][]*Report{{lock(900*time.Microsecond, 910*time.Microsecond), set(800 * time.Microsecond)}, {failed, set(810 * time.Microsecond)}}
	got := [][]*Report{{lock(700*time.Microsecond, 710*time.Microsecond), set(600 * time.Microsecond)}, {lock(720*time.Microsecond, 730*time.Microsecond), set(610 * time.Microsecond)}}
	var b strings.Builder
	WriteCompare(&b, got, was)
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := [][]string{
		{"uncontended acquire p50", "1", "0.900ms", "0.700ms"},
		{"uncontended acquire p50", "2", "FAILED: latch: no leader", "0.720ms"},
		{"uncontended release p50", "1", "0.910ms", "0.710ms"},
		{"uncontended release p50", "2", "FAILED: latch: no leader", "0.730ms"},
		{"set p50", "1", "0.800ms", "0.600ms"},
		{"set p50", "2", "0.810ms", "0.610ms"},
	}
	if len(lines) != len(want)+1 {
		t.Fatalf("table:\n%s", b.String())
	}
	for i, w := range want {
		l := lines[i+1]
		rest, ok := strings.CutPrefix(l, w[0])
		if !ok {
			t.Errorf("line %d %q: want it to start with %q", i+1, l, w[0])
			continue
		}
		if f := strings.Fields(rest); f[0] != w[1] {
			t.Errorf("line %d %q: round %s, want %s", i+1, l, f[0], w[1])
		}
		b, g := strings.Index(rest, w[2]), strings.LastIndex(rest, w[3])
		if b < 0 || g < 0 || b > g {
			t.Errorf("line %d %q: want baseline %s, then this cluster's %s", i+1, l, w[2], w[3])
		}
	}
}
