package bench

import (
	"math"
	"slices"
	"strconv"
	"time"
)

// Millis is a duration that prints and encodes to JSON as milliseconds
// with microsecond precision ("0.412ms", 0.412): the unit latencies of a
// coordination service are read in.
type Millis time.Duration

func (m Millis) ms() float64 { return float64(m) / float64(time.Millisecond) }

// String formats m as "0.412ms".
func (m Millis) String() string { return strconv.FormatFloat(m.ms(), 'f', 3, 64) + "ms" }

// MarshalJSON encodes m as a number of milliseconds.
func (m Millis) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, m.ms(), 'f', 3, 64), nil
}

// Latency summarizes the latencies of one kind of operation.
type Latency struct {
	Count int    `json:"count"`
	P50   Millis `json:"p50_ms"`
	P90   Millis `json:"p90_ms"`
	P99   Millis `json:"p99_ms"`
	Max   Millis `json:"max_ms"`
	Mean  Millis `json:"mean_ms"`
}

// Summarize returns the percentiles of lat, which it sorts in place.
func Summarize(lat []time.Duration) Latency {
	if len(lat) == 0 {
		return Latency{}
	}
	slices.Sort(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	return Latency{
		Count: len(lat),
		P50:   Millis(Percentile(lat, 50)),
		P90:   Millis(Percentile(lat, 90)),
		P99:   Millis(Percentile(lat, 99)),
		Max:   Millis(lat[len(lat)-1]),
		Mean:  Millis(sum / time.Duration(len(lat))),
	}
}

// Percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest sample that at least p% of the
// samples do not exceed. It is always a measured value, never an
// interpolation, so p99 of 50 samples is the largest one. 0 for no
// samples.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// Fairness is the largest count divided by the smallest: 1 when every
// client got as many grants as every other. ok is false when some count
// is 0 (a starved client: the ratio is unbounded) or there are none.
func Fairness(counts []int) (ratio float64, ok bool) {
	if len(counts) == 0 {
		return 0, false
	}
	lo, hi := slices.Min(counts), slices.Max(counts)
	if lo <= 0 {
		return 0, false
	}
	return float64(hi) / float64(lo), true
}

// rate is n per second of d; 0 for no time.
func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
