package client

import (
	"fmt"
	"sort"
	"testing"
	"time"
)

// Benchmarks measure what a user of the client feels, over real QUIC on
// loopback against a 3-member in-process cluster with fsync on:
//
//	go test ./client -run '^$' -bench . -benchtime 2000x
//
// Each reports p50 and p99 latency besides ns/op.

func benchCluster(b *testing.B) (*testCluster, *Client) {
	tc := startCluster(b, 3, clusterOptions{})
	return tc, tc.dial(10 * time.Second)
}

func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

func BenchmarkGet(b *testing.B)      { benchGet(b, false) }
func BenchmarkGetStale(b *testing.B) { benchGet(b, true) }

func benchGet(b *testing.B, stale bool) {
	_, c := benchCluster(b)
	ctx := testCtx(b)
	if _, err := c.Create(ctx, "/bench", make([]byte, 100)); err != nil {
		b.Fatal(err)
	}
	var opts []ReadOption
	if stale {
		opts = append(opts, Stale())
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, _, err := c.Get(ctx, "/bench", opts...); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportLatency(b, lat)
}

func BenchmarkCreate(b *testing.B) {
	_, c := benchCluster(b)
	ctx := testCtx(b)
	if _, err := c.Create(ctx, "/bench", nil); err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 100)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if _, err := c.Create(ctx, fmt.Sprintf("/bench/%d", i), data); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportLatency(b, lat)
}

// BenchmarkWatchDelay measures from a Set's acknowledgement to its event
// arriving on a watch of the same client: the delay a watcher sees beyond
// the commit.
func BenchmarkWatchDelay(b *testing.B) {
	_, c := benchCluster(b)
	ctx := testCtx(b)
	if _, err := c.Create(ctx, "/bench", nil); err != nil {
		b.Fatal(err)
	}
	w, err := c.Watch(ctx, "/bench", Data())
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		st, err := c.Set(ctx, "/bench", []byte("x"))
		if err != nil {
			b.Fatal(err)
		}
		acked := time.Now()
		for {
			ev, ok := <-w.Events()
			if !ok {
				b.Fatalf("watch ended: %v", w.Err())
			}
			if ev.Revision == st.ModRev {
				break
			}
		}
		lat = append(lat, time.Since(acked))
	}
	b.StopTimer()
	reportLatency(b, lat)
}
