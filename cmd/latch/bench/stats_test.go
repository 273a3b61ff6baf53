package bench

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

func ms(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	for _, tc := range []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one sample is every percentile", []time.Duration{7}, 1, 7},
		{"one sample p99", []time.Duration{7}, 99, 7},
		{"p50 of 1..100 is the 50th", hundred, 50, 50 * time.Millisecond},
		{"p90 of 1..100", hundred, 90, 90 * time.Millisecond},
		{"p99 of 1..100", hundred, 99, 99 * time.Millisecond},
		{"p100 is the max", hundred, 100, 100 * time.Millisecond},
		{"tiny p is the min", hundred, 0.001, time.Millisecond},
		// nearest rank rounds up: p50 of 4 is the 2nd, p51 the 3rd.
		{"p50 of 4", []time.Duration{1, 2, 3, 4}, 50, 2},
		{"p51 of 4", []time.Duration{1, 2, 3, 4}, 51, 3},
		// p99 of 50 samples is the largest, not an interpolation.
		{"p99 of 50", hundred[:50], 99, 50 * time.Millisecond},
		{"p90 of 10", hundred[:10], 90, 9 * time.Millisecond},
	} {
		if got := Percentile(tc.sorted, tc.p); got != tc.want {
			t.Errorf("%s: Percentile(p%v) = %v, want %v", tc.name, tc.p, got, tc.want)
		}
	}
}

func TestSummarizeSortsAndAverages(t *testing.T) {
	lat := make([]time.Duration, 1000)
	for i := range lat {
		lat[i] = time.Duration(i+1) * time.Microsecond
	}
	rand.Shuffle(len(lat), func(i, j int) { lat[i], lat[j] = lat[j], lat[i] })
	got := Summarize(lat)
	want := Latency{
		Count: 1000,
		P50:   Millis(500 * time.Microsecond),
		P90:   Millis(900 * time.Microsecond),
		P99:   Millis(990 * time.Microsecond),
		Max:   Millis(1000 * time.Microsecond),
		Mean:  Millis(500500 * time.Nanosecond),
	}
	if got != want {
		t.Errorf("Summarize = %+v, want %+v", got, want)
	}
	if (Summarize(nil) != Latency{}) {
		t.Errorf("Summarize(nil) = %+v, want zero", Summarize(nil))
	}
}

func TestFairness(t *testing.T) {
	for _, tc := range []struct {
		counts []int
		want   float64
		ok     bool
	}{
		{nil, 0, false},
		{[]int{5}, 1, true},
		{[]int{10, 10, 10}, 1, true},
		{[]int{10, 12, 11}, 1.2, true},
		{[]int{3, 9}, 3, true},
		{[]int{9, 0, 9}, 0, false}, // a starved client
	} {
		got, ok := Fairness(tc.counts)
		if ok != tc.ok || got != tc.want {
			t.Errorf("Fairness(%v) = %v, %v; want %v, %v", tc.counts, got, ok, tc.want, tc.ok)
		}
	}
}

func TestMillis(t *testing.T) {
	for _, tc := range []struct {
		d          time.Duration
		text, json string
	}{
		{ms(0.4123), "0.412ms", "0.412"},
		{ms(12), "12.000ms", "12.000"},
		{0, "0.000ms", "0.000"},
		{1500 * time.Nanosecond, "0.002ms", "0.002"},
	} {
		b, err := json.Marshal(Millis(tc.d))
		if err != nil {
			t.Fatal(err)
		}
		if Millis(tc.d).String() != tc.text || string(b) != tc.json {
			t.Errorf("%v: %q %s, want %q %s", tc.d, Millis(tc.d).String(), b, tc.text, tc.json)
		}
	}
}

func TestFirstError(t *testing.T) {
	a, b := errors.New("a"), errors.New("b")
	for _, tc := range []struct {
		errs []error
		want string
	}{
		{nil, ""},
		{[]error{nil, nil}, ""},
		{[]error{nil, a}, "a"},
		{[]error{nil, a, nil, b, b}, "a (and 2 more failures)"},
	} {
		err := firstError(tc.errs)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("firstError(%v) = %q, want %q", tc.errs, got, tc.want)
		}
		if len(tc.want) > 0 && !errors.Is(err, a) {
			t.Errorf("firstError(%v) does not wrap the first error", tc.errs)
		}
	}
}
