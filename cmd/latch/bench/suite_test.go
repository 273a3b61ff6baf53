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
