package server_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/servertest"
)

// benchCluster is a 3-member cluster on loopback with fsync on, as users
// would run it, with the leader's index.
func benchCluster(b *testing.B) (*servertest.Cluster, int) {
	c := servertest.StartCluster(b, 3, nil)
	leader := c.WaitLeader()
	c.WaitMembers()
	return c, leader
}

var payload100 = []byte("0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789")

// BenchmarkProposeLatency: one proposer, 100-byte creates, time from
// Propose to applied on the leader (committed on a quorum, fsynced).
func BenchmarkProposeLatency(b *testing.B) {
	c, leader := benchCluster(b)
	s := c.Server(leader)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	i := 0
	for b.Loop() {
		start := time.Now()
		res, err := s.Propose(ctx, &namespace.Command{Op: namespace.OpCreate, Path: fmt.Sprintf("/l%09d", i), Data: payload100})
		if err != nil || res.Err != nil {
			b.Fatalf("propose: %v %v", err, res)
		}
		lat = append(lat, time.Since(start))
		i++
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(len(lat))/b.Elapsed().Seconds(), "cmds/s")
}

// BenchmarkProposeThroughput: 64 concurrent proposers, 100-byte creates.
func BenchmarkProposeThroughput(b *testing.B) {
	c, leader := benchCluster(b)
	s := c.Server(leader)
	ctx := context.Background()
	const proposers = 64
	var next atomic.Int64
	var failed atomic.Value
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for p := 0; p < proposers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				res, err := s.Propose(ctx, &namespace.Command{Op: namespace.OpCreate, Path: fmt.Sprintf("/t%09d", i), Data: payload100})
				if err != nil || res.Err != nil {
					failed.Store(fmt.Sprintf("propose: %v %v", err, res))
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if f := failed.Load(); f != nil {
		b.Fatal(f)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "cmds/s")
}
