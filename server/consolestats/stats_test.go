package consolestats

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/latch-io/latch/namespace"
)

func TestBucketQuantile(t *testing.T) {
	bounds := []float64{1, 2, 4, 8}
	for _, tc := range []struct {
		name       string
		q          float64
		cumulative []float64
		n          float64
		want       float64
	}{
		{"all in the first bucket: interpolated from 0", 0.5, []float64{10, 10, 10, 10}, 10, 0.5},
		{"p99 in the last bucket", 0.99, []float64{50, 90, 90, 100}, 100, 4 + 4*(99-90)/10.0},
		{"median on a bucket edge", 0.5, []float64{50, 100, 100, 100}, 100, 1},
		{"beyond the last bound: the last bound", 0.99, []float64{0, 0, 0, 1}, 10, 8},
		{"nothing observed", 0.5, []float64{0, 0, 0, 0}, 0, 0},
	} {
		if got := bucketQuantile(tc.q, bounds, tc.cumulative, tc.n); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The ring keeps the last History samples, oldest first, and since
// returns only those after a sequence number.
func TestConsoleStatsRing(t *testing.T) {
	st := New(Source{})
	for range History + 5 {
		st.push(Sample{})
	}
	all, _ := st.Since(0)
	if len(all) != History || all[0].Seq != 6 || all[len(all)-1].Seq != History+5 {
		t.Fatalf("ring: %d samples, %d..%d", len(all), all[0].Seq, all[len(all)-1].Seq)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq != all[i-1].Seq+1 {
			t.Fatalf("ring out of order at %d: %d after %d", i, all[i].Seq, all[i-1].Seq)
		}
	}
	if tail, _ := st.Since(History + 3); len(tail) != 2 || tail[0].Seq != History+4 {
		t.Fatalf("since(%d) = %v", History+3, tail)
	}
}

// A sample is the difference of two readings of the member's counters
// over the time between them: rates per second, the new terms, the node
// events applied, the quantiles of the requests answered in between
// (from the request histogram of this member only), and the gauges.
func TestConsoleStatsSample(t *testing.T) {
	const id = "stats-sample-test"
	// The member's request series, as package server declares them.
	requestsTotal := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "latch_requests_total"}, []string{"member", "type", "result"})
	requestSeconds := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "latch_request_duration_seconds", Buckets: prometheus.ExponentialBuckets(0.00005, 2, 18),
	}, []string{"member", "type"})
	now := time.Unix(1000, 0)
	var term uint64 = 3
	var writes float64
	st := New(Source{
		ID:       id,
		Now:      func() time.Time { return now },
		Term:     func() uint64 { return term },
		Leader:   func() bool { return true },
		Writes:   func() float64 { return writes },
		Sessions: func() (int, error) { return 7, nil },
		Locks:    func() (int, int, error) { return 2, 5, nil },
		Requests: requestsTotal,
		Latency:  requestSeconds,
	})
	st.sample(false)
	first, _ := st.Since(0)
	if len(first) != 1 || first[0].P50 != nil || first[0].Sessions != nil || first[0].Writes != 0 {
		t.Fatalf("first sample (no earlier reading, no gauges): %+v", first)
	}

	// Two seconds: 40 writes, 10 Gets (9 ok), 2 Creates, 99 Gets of
	// 0.1 ms and one of 1 s; 6 node events; a new term. Another member's
	// requests must not count.
	now = now.Add(2 * time.Second)
	writes, term = 40, 5
	for i := 0; i < 9; i++ {
		requestsTotal.WithLabelValues(id, "Get", "ok").Inc()
	}
	requestsTotal.WithLabelValues(id, "Get", "error").Inc()
	requestsTotal.WithLabelValues(id, "Create", "ok").Add(2)
	requestsTotal.WithLabelValues("another-"+id, "Get", "ok").Add(1000)
	for i := 0; i < 99; i++ {
		requestSeconds.WithLabelValues(id, "Get").Observe(0.0001)
	}
	requestSeconds.WithLabelValues(id, "Create").Observe(1)
	requestSeconds.WithLabelValues("another-"+id, "Get").Observe(5)
	st.Applied([]*namespace.Result{{Events: []namespace.Event{
		{Type: namespace.EventCreated, Path: "/a"}, {Type: namespace.EventSessionOpened},
	}}, {Events: []namespace.Event{
		{Type: namespace.EventDataChanged}, {Type: namespace.EventDeleted}, {Type: namespace.EventChildrenChanged},
		{Type: namespace.EventCreated}, {Type: namespace.EventCreated},
	}}})
	st.sample(true)

	got, _ := st.Since(first[0].Seq)
	if len(got) != 1 {
		t.Fatalf("%d samples after the first", len(got))
	}
	s := got[0]
	check := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	check("writes/s", s.Writes, 20)
	check("reads/s (ok Gets)", s.Reads, 4.5)
	check("requests/s", s.Requests, 6)
	check("watch events/s (node events)", s.WatchEvents, 3)
	if s.LeaderChanges != 2 || s.Term != 5 || !s.Leader || s.Member != id || s.Time != now.UnixMilli() {
		t.Errorf("sample %+v", s)
	}
	if s.P50 == nil || s.P99 == nil {
		t.Fatalf("no quantiles: %+v", s)
	}
	// 100 requests: the median in the bucket of 0.1 ms (50µs..100µs),
	// the 99th at its top edge, the one slow request above both.
	if *s.P50 <= 0.05 || *s.P50 > 0.1 || *s.P99 > 0.1+1e-9 || *s.P99 < *s.P50 {
		t.Errorf("p50 %v ms, p99 %v ms", *s.P50, *s.P99)
	}
	if s.Sessions == nil || *s.Sessions != 7 || s.LocksHeld == nil || *s.LocksHeld != 2 || *s.LocksWaiting != 5 {
		t.Errorf("gauges: sessions %v, held %v, waiting %v", s.Sessions, s.LocksHeld, s.LocksWaiting)
	}
}
