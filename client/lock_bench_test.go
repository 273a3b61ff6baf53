package client

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latch-io/latch/server"
	"github.com/latch-io/latch/server/servertest"
	"github.com/latch-io/latch/session"
)

// Lock benchmarks, against a 3-member in-process cluster over QUIC with
// fsync on (see bench_test.go):
//
//	go test ./client -run '^$' -bench 'Lock' -benchtime 1x   # scenarios
//	go test ./client -run '^$' -bench 'LockUncontended' -benchtime 2000x
//
// etcd's published figures for comparison: 1.1 ms uncontended acquire,
// 387 contended acquire+release per second with a p99 of 347 ms.

// benchLockCluster is a lock test cluster that admits many sessions and
// streams per connection (the waiter benchmarks hold 10,000 requests).
func benchLockCluster(b *testing.B) *testCluster {
	tc := &testCluster{t: b}
	tc.Cluster = servertest.StartCluster(b, 3, &servertest.Options{
		Configure: func(i int, cfg *server.Config) {
			cfg.Limits.DefaultLockDelayMillis = testLockDelay.Milliseconds()
			cfg.ExpiryTick = testExpiryTick
			cfg.MaxSessionsPerIdentity = 100000
		},
	})
	var err error
	if tc.tls, err = session.ClientTLS(tc.Certs().CA, "", ""); err != nil {
		b.Fatal(err)
	}
	tc.WaitLeader()
	tc.WaitMembers()
	return tc
}

// BenchmarkLockUncontended: Lock and Unlock of a free lock by one client;
// the latency reported is the acquire's.
func BenchmarkLockUncontended(b *testing.B) {
	tc := benchLockCluster(b)
	c := tc.dial(10 * time.Second)
	ctx := context.Background()
	m := NewMutex(c.Session(), "/bench/uncontended")
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := m.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		if err := m.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportLatency(b, lat)
}

// BenchmarkLockContended: 64 clients (own connection and session each)
// acquire and release 8 locks, each client always the same lock, for
// 3 seconds per iteration. Reported: acquire+release per second, acquire
// p50/p99, and fairness (most grants to one client over fewest, among
// clients of one lock).
func BenchmarkLockContended(b *testing.B) {
	const clients, locks, run = 64, 8, 3 * time.Second
	tc := benchLockCluster(b)
	cs := make([]*Client, clients)
	for i := range cs {
		cs[i] = tc.dial(10 * time.Second)
	}
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		var (
			mu     sync.Mutex
			lat    []time.Duration
			grants = make([]int, clients)
			total  atomic.Int64
			wg     sync.WaitGroup
		)
		stop := time.Now().Add(run)
		for i, c := range cs {
			wg.Go(func() {
				m := NewMutex(c.Session(), fmt.Sprintf("/bench/contended/%d", i%locks))
				var mine []time.Duration
				for time.Now().Before(stop) {
					start := time.Now()
					if err := m.Lock(ctx); err != nil {
						b.Error(err)
						return
					}
					mine = append(mine, time.Since(start))
					if err := m.Unlock(ctx); err != nil {
						b.Error(err)
						return
					}
					grants[i]++
					total.Add(1)
				}
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			})
		}
		wg.Wait()
		b.ReportMetric(float64(total.Load())/run.Seconds(), "acq+rel/s")
		reportLatency(b, lat)
		fairness := 0.0
		for l := range locks {
			lo, hi := 1<<30, 0
			for i := l; i < clients; i += locks {
				lo, hi = min(lo, grants[i]), max(hi, grants[i])
			}
			if lo > 0 {
				fairness = max(fairness, float64(hi)/float64(lo))
			}
		}
		b.ReportMetric(fairness, "max/min-grants")
	}
}

// BenchmarkLockReleaseWaiters10 and ...10000: the time from a holder's
// Unlock to the next waiter's Lock returning, with 10 or 10,000 more
// waiters queued behind. 100 exclusive waiters (one session each) take
// the lock in turn; behind them wait 10 or 10,000 shared requests (of a
// few sessions: a session may queue many shared requests). A release's
// cost must not grow with the waiters behind it.
func BenchmarkLockReleaseWaiters10(b *testing.B)    { benchReleaseWaiters(b, 10) }
func BenchmarkLockReleaseWaiters10000(b *testing.B) { benchReleaseWaiters(b, 10000) }

func benchReleaseWaiters(b *testing.B, behind int) {
	const chain, sharedClients = 100, 5
	tc := benchLockCluster(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := tc.dial(30 * time.Second)
	shared := make([]*Client, sharedClients)
	for i := range shared {
		shared[i] = tc.dial(30 * time.Second)
	}
	sessions := make([]*Session, chain+1)
	for i := range sessions {
		s, err := c.NewSession(ctx, 30*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		sessions[i] = s
	}
	b.ResetTimer()
	for n := range b.N {
		b.StopTimer()
		path := fmt.Sprintf("/bench/release/%d", n)
		first := NewMutex(sessions[0], path)
		if err := first.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		// The chain queues in order: each waiter's request is in the
		// queue before the next one's is sent.
		var (
			released = make([]atomic.Int64, chain+1) // unix ns of each Unlock call
			delays   = make([]time.Duration, 0, chain)
			dmu      sync.Mutex
			wg       sync.WaitGroup
		)
		// Every request is a child node of the path: its child count is
		// the queue's length, and much cheaper to poll than the queue.
		queued := func(want int) {
			for {
				st, err := c.Stat(ctx, path)
				if err != nil {
					b.Fatal(err)
				}
				if int(st.NumChildren) >= want {
					return
				}
				select {
				case <-ctx.Done():
					b.Fatalf("%d queued, want %d", st.NumChildren, want)
				case <-time.After(time.Millisecond): // polling the queue with ctx's deadline
				}
			}
		}
		for i := 1; i <= chain; i++ {
			m := NewMutex(sessions[i], path)
			wg.Go(func() {
				if err := m.Lock(ctx); err != nil {
					b.Error(err)
					return
				}
				d := time.Since(time.Unix(0, released[i-1].Load()))
				dmu.Lock()
				delays = append(delays, d)
				dmu.Unlock()
				released[i].Store(time.Now().UnixNano())
				if err := m.Unlock(ctx); err != nil {
					b.Error(err)
				}
			})
			queued(i + 1)
		}
		var rws []*RWMutex
		var swg sync.WaitGroup
		for i := range behind {
			m := NewRWMutex(shared[i%sharedClients].Session(), path)
			rws = append(rws, m)
			swg.Go(func() { _ = m.RLock(ctx) })
		}
		queued(chain + 1 + behind)
		b.StartTimer()
		released[0].Store(time.Now().UnixNano())
		if err := first.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		wg.Wait()
		b.StopTimer()
		swg.Wait() // the readers are granted once the chain is through
		for _, m := range rws {
			_ = m.RUnlock(ctx)
		}
		sort.Slice(delays, func(i, j int) bool { return delays[i] < delays[j] })
		if len(delays) > 0 {
			b.ReportMetric(float64(delays[len(delays)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(delays[len(delays)*9/10].Microseconds()), "p90-µs")
		}
		b.StartTimer()
	}
}
