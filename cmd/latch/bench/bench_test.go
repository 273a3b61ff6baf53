package bench

import (
	"context"
	"testing"
	"time"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/server/servertest"
	"github.com/latch-io/latch/session"
)

// BenchmarkInProcess runs the scenarios against a 3-member cluster inside
// the test process (real raft, badger with fsync, QUIC and TLS on
// loopback), so that one CPU profile covers the client and the servers:
//
//	go test ./cmd/latch/bench -run '^$' -bench InProcess -benchtime 2000x -cpuprofile cpu.out
//	go tool pprof -top cpu.out
//
// b.N is the operation count (contended runs 3s whatever b.N is). The
// figures are the same as `latch bench`'s, but the three members and the
// client share the process, so only the profile is the point here; the
// sessions scenario is left out because its leader figures would cover
// the whole process.
func BenchmarkInProcess(b *testing.B) {
	cl := servertest.StartCluster(b, 3, nil)
	cl.WaitLeader()
	cl.WaitMembers()
	tlsConf, err := session.ClientTLS(cl.Certs().CA, "", "")
	if err != nil {
		b.Fatal(err)
	}
	var eps []string
	for i := range cl.N() {
		eps = append(eps, cl.Server(i).ClientAddr())
	}
	ccfg := client.Config{Endpoints: eps, TLS: tlsConf}
	for _, cfg := range []Config{
		{Scenario: ScenarioGet},
		{Scenario: ScenarioStaleGet},
		{Scenario: ScenarioCreate},
		{Scenario: ScenarioLock},
		{Scenario: ScenarioContended, Duration: 3 * time.Second},
	} {
		b.Run(cfg.Scenario, func(b *testing.B) {
			cfg.Client, cfg.Ops = ccfg, b.N
			b.ResetTimer()
			rep, err := Run(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			l := rep.Latency[0]
			b.ReportMetric(float64(time.Duration(l.P50).Microseconds()), "p50-µs")
			b.ReportMetric(float64(time.Duration(l.P99).Microseconds()), "p99-µs")
			b.ReportMetric(rep.OpsPerSec, "ops/s")
		})
	}
}
