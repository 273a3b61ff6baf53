package server

import (
	"math"
	"testing"
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

// The ring keeps the last statsHistory samples, oldest first, and since
// returns only those after a sequence number.
func TestConsoleStatsRing(t *testing.T) {
	st := newConsoleStats(nil)
	for range statsHistory + 5 {
		st.push(statsSample{})
	}
	all, _ := st.since(0)
	if len(all) != statsHistory || all[0].Seq != 6 || all[len(all)-1].Seq != statsHistory+5 {
		t.Fatalf("ring: %d samples, %d..%d", len(all), all[0].Seq, all[len(all)-1].Seq)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Seq != all[i-1].Seq+1 {
			t.Fatalf("ring out of order at %d: %d after %d", i, all[i].Seq, all[i-1].Seq)
		}
	}
	if tail, _ := st.since(statsHistory + 3); len(tail) != 2 || tail[0].Seq != statsHistory+4 {
		t.Fatalf("since(%d) = %v", statsHistory+3, tail)
	}
}
