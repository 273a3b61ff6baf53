package bench

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// startCells starts n cells c0..c(n-1) of members latchd processes each
// and returns their map and a client config trusting every cell's CA.
func startCells(tb testing.TB, n, members int) (client.CellMap, client.Config) {
	tb.Helper()
	m := client.CellMap{}
	pool := x509.NewCertPool()
	for i := range n {
		name := fmt.Sprintf("c%d", i)
		cl := proc.StartCluster(tb, members, "--cell", name)
		cl.WaitLeader(tb)
		pem, err := os.ReadFile(cl.Certs.CA)
		if err != nil || !pool.AppendCertsFromPEM(pem) {
			tb.Fatalf("cell %s CA: %v", name, err)
		}
		m[name] = cl.ClientAddrs()
	}
	tlsConf, err := session.ClientTLS("", "", "")
	if err != nil {
		tb.Fatal(err)
	}
	tlsConf.RootCAs = pool
	return m, client.Config{TLS: tlsConf, SessionTTL: 3 * time.Second}
}

// TestContendedCells runs contended in two cells at once: each cell's
// report is complete with its leader's CPU per cycle, the aggregate is
// their sum, and each run deleted its prefix in its own cell. It asserts
// no timings.
func TestContendedCells(t *testing.T) {
	if testing.Short() {
		t.Skip("starts latchd processes")
	}
	m, ccfg := startCells(t, 2, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := RunCells(ctx, Config{Scenario: ScenarioContended, Client: ccfg, Concurrency: 4, Locks: 2, Duration: time.Second}, m)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for name, r := range rep.Cells {
		if r.Ops == 0 || r.Contention == nil || r.Contention.LeaderCPUMillisPerOp == nil || *r.Contention.LeaderCPUMillisPerOp <= 0 {
			t.Fatalf("cell %s: incomplete report %+v", name, r)
		}
		sum += r.OpsPerSec
	}
	if len(rep.Cells) != 2 || rep.OpsPerSec != sum || rep.MaxP99 <= 0 {
		t.Fatalf("aggregate %+v (sum %v)", rep, sum)
	}
	var b strings.Builder
	rep.WriteTable(&b)
	t.Logf("\n%s", b.String())
	x, err := client.DialCells(ctx, client.CellsConfig{Config: ccfg, Map: m})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	for name := range m {
		kids, err := x.Children(ctx, "/"+name)
		if err != nil || len(kids) != 0 {
			t.Fatalf("cell %s left %v (%v)", name, kids, err)
		}
	}
	if _, err := RunCells(ctx, Config{Scenario: ScenarioLock, Client: ccfg}, m); err == nil {
		t.Fatal("a scenario other than contended ran over cells")
	}
}

// BenchmarkContendedCells runs contended over 1, 2 and 3 cells of three
// latchd processes each, all on this machine:
//
//	go test ./cmd/latch/bench -run '^$' -bench ContendedCells -benchtime 1x
//
// It reports the aggregate cycles/s, the highest cell p99 and the mean
// leader CPU per cycle. Every process shares this machine's cores, so
// the aggregate here is bounded by the machine, not by the cells.
func BenchmarkContendedCells(b *testing.B) {
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("cells=%d", n), func(b *testing.B) {
			m, ccfg := startCells(b, n, 3)
			for range b.N {
				rep, err := RunCells(context.Background(), Config{Scenario: ScenarioContended, Client: ccfg, Duration: 5 * time.Second}, m)
				if err != nil {
					b.Fatal(err)
				}
				var cpu float64
				var got int
				for _, r := range rep.Cells {
					if c := r.Contention; c != nil && c.LeaderCPUMillisPerOp != nil {
						cpu += *c.LeaderCPUMillisPerOp
						got++
					}
				}
				b.ReportMetric(rep.OpsPerSec, "cycles/s")
				b.ReportMetric(float64(time.Duration(rep.MaxP99).Microseconds()), "max-p99-µs")
				if got > 0 {
					b.ReportMetric(1000*cpu/float64(got), "leader-cpu-µs/cycle")
				}
			}
		})
	}
}
