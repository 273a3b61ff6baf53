package server_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server"
	"github.com/latch-io/latch/session"
)

// Benchmarks of what a client feels over QUIC on loopback, against a
// 3-member in-process cluster, one request at a time:
//
//	go test ./server -run '^$' -bench Front -benchtime 2000x
//
// Each reports p50 and p99 in milliseconds next to ns/op.

// reportLatency reports the p50 and p99 of samples.
func reportLatency(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	at := func(q float64) float64 {
		return float64(samples[min(len(samples)-1, int(q*float64(len(samples))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}

// benchRequests times b.N round trips of req(i) on conn.
func benchRequests(b *testing.B, conn *session.Conn, req func(i int) *session.Request) {
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		ok(b, conn, req(i))
		samples = append(samples, time.Since(start))
	}
	b.StopTimer()
	reportLatency(b, samples)
}

func BenchmarkFrontGet(b *testing.B) {
	fc := startFront(b, 3, nil)
	conn := fc.dial(fc.WaitLeader())
	ok(b, conn, &session.Request{Type: session.MsgCreate, Path: "/bench", Data: []byte("value")})
	benchRequests(b, conn, func(int) *session.Request { return &session.Request{Type: session.MsgGet, Path: "/bench"} })
}

func BenchmarkFrontStaleGet(b *testing.B) {
	fc := startFront(b, 3, nil)
	leader := fc.WaitLeader()
	lconn := fc.dial(leader)
	ok(b, lconn, &session.Request{Type: session.MsgCreate, Path: "/bench", Data: []byte("value")})
	fc.WaitApplied(ok(b, lconn, &session.Request{Type: session.MsgSync}).Rev)
	conn := fc.dial(follower(fc, leader))
	benchRequests(b, conn, func(int) *session.Request {
		return &session.Request{Type: session.MsgGet, Path: "/bench", Stale: true}
	})
}

func BenchmarkFrontCreate(b *testing.B) {
	fc := startFront(b, 3, nil)
	conn := fc.dial(fc.WaitLeader())
	ok(b, conn, &session.Request{Type: session.MsgCreate, Path: "/bench"})
	benchRequests(b, conn, func(i int) *session.Request {
		return &session.Request{Type: session.MsgCreate, Path: fmt.Sprintf("/bench/k%09d", i), Data: []byte("value")}
	})
}

// applyTimes records when each member applied each revision.
type applyTimes struct {
	member int
	mu     *sync.Mutex
	at     map[[2]uint64]time.Time
}

func (a applyTimes) Applied(results []*namespace.Result) {
	now := time.Now()
	a.mu.Lock()
	for _, r := range results {
		a.at[[2]uint64{uint64(a.member), r.Index}] = now
	}
	a.mu.Unlock()
}

// BenchmarkFrontWatchDelay measures commit-to-event: from the moment the
// leader applied a write (its observer's clock) to the moment a client
// watching on the leader reads the event.
func BenchmarkFrontWatchDelay(b *testing.B) {
	times := applyTimes{mu: &sync.Mutex{}, at: map[[2]uint64]time.Time{}}
	fc := startFront(b, 3, func(i int, cfg *server.Config) {
		t := times
		t.member = i
		cfg.Observer = t
	})
	leader := fc.WaitLeader()
	conn := fc.dial(leader)
	ok(b, conn, &session.Request{Type: session.MsgCreate, Path: "/bench"})
	sr, err := session.OpenStreaming(wireCtx(b), fc.dial(leader), &session.Request{Type: session.MsgWatch, Path: "/bench", Kind: session.WatchData})
	if err != nil {
		b.Fatal(err)
	}
	defer sr.Close()
	if _, err := sr.Next(); err != nil {
		b.Fatal(err)
	}
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		ok(b, conn, &session.Request{Type: session.MsgSet, Path: "/bench", Data: []byte("v"), Version: namespace.AnyVersion})
		resp, err := sr.Next()
		got := time.Now()
		if err != nil || len(resp.Events) != 1 {
			b.Fatalf("event: %+v %v", resp, err)
		}
		times.mu.Lock()
		applied, found := times.at[[2]uint64{uint64(leader), resp.Events[0].Rev}]
		times.mu.Unlock()
		if !found {
			b.Fatalf("no apply time for rev %d", resp.Events[0].Rev)
		}
		samples = append(samples, got.Sub(applied))
	}
	b.StopTimer()
	reportLatency(b, samples)
}
