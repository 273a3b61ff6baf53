package bench

import (
	"encoding/json"
	"strings"
	"testing"
)

func fptr(f float64) *float64 { return &f }

func TestReportTable(t *testing.T) {
	lat := Latency{Count: 2000, P50: Millis(ms(0.412)), P90: Millis(ms(0.5)), P99: Millis(ms(0.81)), Max: Millis(ms(2.1)), Mean: Millis(ms(0.43))}
	for _, tc := range []struct {
		name string
		rep  Report
		want string
	}{
		{"get", Report{
			Scenario: ScenarioGet, Ops: 2000, Concurrency: 1, Conns: 1, Elapsed: Millis(ms(900)), OpsPerSec: 2222.22,
			Latency: []OpLatency{{"get", lat}},
		}, `
scenario    get
ops         2000 operations by 1 goroutine on 1 connection
elapsed     900ms
throughput  2222.2 ops/s

OP   COUNT  P50      P90      P99      MAX      MEAN
get  2000   0.412ms  0.500ms  0.810ms  2.100ms  0.430ms
`},
		{"lock, truncated, with a note", Report{
			Scenario: ScenarioLock, Ops: 10, Concurrency: 2, Conns: 2, Elapsed: Millis(ms(20)), OpsPerSec: 500,
			Latency:   []OpLatency{{"acquire", Latency{Count: 10}}, {"release", Latency{Count: 10}}},
			Truncated: true, Notes: []string{"uncontended"},
		}, `
scenario    lock
ops         10 lock+unlock by 2 goroutines on 2 connections
elapsed     20ms
throughput  500.0 ops/s
truncated   yes: stopped early, figures cover what completed

OP       COUNT  P50      P90      P99      MAX      MEAN
acquire  10     0.000ms  0.000ms  0.000ms  0.000ms  0.000ms
release  10     0.000ms  0.000ms  0.000ms  0.000ms  0.000ms

note: uncontended
`},
		{"contended", Report{
			Scenario: ScenarioContended, Ops: 45000, Concurrency: 64, Conns: 4, Elapsed: Millis(ms(10000)), OpsPerSec: 4500,
			Latency:    []OpLatency{{"acquire", lat}},
			Contention: &Contention{Clients: 64, Locks: 8, MinGrants: 680, MaxGrants: 720, Fairness: fptr(720.0 / 680)},
		}, `
scenario       contended
clients        64 sessions on 4 connections, 8 locks
cycles         45000 lock+unlock
elapsed        10s
throughput     4500.0 acquire+release/s
grants/client  min 680, max 720, fairness (max/min) 1.06

OP       COUNT  P50      P90      P99      MAX      MEAN
acquire  2000   0.412ms  0.500ms  0.810ms  2.100ms  0.430ms
`},
		{"contended, starved", Report{
			Scenario: ScenarioContended, Ops: 5, Concurrency: 2, Conns: 1,
			Contention: &Contention{Clients: 2, Locks: 1, MinGrants: 0, MaxGrants: 5},
		}, `
scenario       contended
clients        2 sessions on 1 connection, 1 lock
cycles         5 lock+unlock
elapsed        0s
throughput     0.0 acquire+release/s
grants/client  min 0, max 5, fairness (max/min) unbounded (a client got no grant)
`},
		{"sessions", Report{
			Scenario: ScenarioSessions, Ops: 5000, Concurrency: 64, Conns: 1, Elapsed: Millis(ms(2500)), OpsPerSec: 2000,
			Sessions: &SessionLoad{
				Sessions: 5000, TTL: Millis(ms(10000)), OpenRate: 2000, Settle: Millis(ms(3333)), Window: Millis(ms(30000)),
				Leader: "n1", LeaderAdmin: "127.0.0.1:7422", LeaderCPUPercent: 4.25, LeaderIdleCPUPercent: 3,
				RSSBefore: 40 << 20, RSSHeld: 60 << 20, RSSPerSession: 4194.3, LiveHeapPerSession: fptr(3000),
				GoroutinesBefore: 50, GoroutinesHeld: 54, GoroutinesPerConn: 4, StackPerConn: 16384,
				BenchCPUPercent: 12.5, CloseRate: 4000,
			},
		}, `
scenario          sessions
sessions          5000 opened by 64 openers on 1 connection
elapsed           2.5s
open rate         2000.0 sessions/s
session TTL       10s
settle, window    3.333s, 30s
leader            n1 (admin 127.0.0.1:7422)
leader CPU        4.2% of one core (3.0% before the sessions)
leader RSS        40.0 MiB before, 60.0 MiB held: 4.1 KiB per session
leader live heap  2.9 KiB per session (from the GC goal)
goroutines        leader: 50 before, 54 held: 4.00 and 16.0 KiB of stack per connection
bench CPU         12.5% of one core
lost sessions     0
close rate        4000.0 sessions/s
`},
	} {
		got := tc.rep.Text()
		want := strings.TrimPrefix(tc.want, "\n")
		if got != want {
			t.Errorf("%s: table\n%s\nwant\n%s", tc.name, got, want)
		}
	}
}

func TestReportJSON(t *testing.T) {
	rep := Report{
		Scenario: ScenarioContended, Ops: 3, Concurrency: 2, Conns: 1, Elapsed: Millis(ms(1.5)), OpsPerSec: 2000,
		Latency:    []OpLatency{{"acquire", Latency{Count: 3, P50: Millis(ms(0.25))}}},
		Contention: &Contention{Clients: 2, Locks: 1, MinGrants: 0, MaxGrants: 3},
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"scenario":"contended","ops":3,"concurrency":2,"conns":1,"elapsed_ms":1.500,"ops_per_sec":2000,` +
		`"latency":[{"op":"acquire","count":3,"p50_ms":0.250,"p90_ms":0.000,"p99_ms":0.000,"max_ms":0.000,"mean_ms":0.000}],` +
		`"contention":{"clients":2,"locks":1,"min_grants":0,"max_grants":3,"fairness":null}}`
	if string(b) != want {
		t.Errorf("JSON\n%s\nwant\n%s", b, want)
	}
}

func TestBytes(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		want string
	}{
		{0, "0 B"}, {512, "512 B"}, {-512, "-512 B"}, {2048, "2.0 KiB"}, {20.5 * 1024, "20.5 KiB"},
		{-3 << 20, "-3.0 MiB"}, {1536 << 10, "1.5 MiB"},
	} {
		if got := bytes(tc.f); got != tc.want {
			t.Errorf("bytes(%v) = %q, want %q", tc.f, got, tc.want)
		}
	}
}
