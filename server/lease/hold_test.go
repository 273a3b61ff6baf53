package lease

import (
	"testing"
	"time"
)

func TestReconnectGrace(t *testing.T) {
	for _, c := range []struct {
		n     int
		rate  float64
		limit time.Duration
		want  time.Duration
	}{
		{0, 400, 45 * time.Second, 0},
		{400, 400, 45 * time.Second, 2 * time.Second},
		{100000, 400, 45 * time.Second, 45 * time.Second},
	} {
		if got := reconnectGrace(c.n, c.rate, c.limit); got != c.want {
			t.Errorf("reconnectGrace(%d, %v, %v) = %v, want %v", c.n, c.rate, c.limit, got, c.want)
		}
	}
}

// The rule of the two holds: after a leader change nothing expires while
// clients are taken in, up to maxGrace after the load; afterwards, while
// clients are refused for load, only sessions maxGrace past their
// deadline expire (their client may be among those refused); otherwise
// every session past its deadline.
func TestExpiryCutoff(t *testing.T) {
	const grace = 45 * time.Second
	loaded := time.Unix(1000, 0)
	cases := []struct {
		name               string
		since              time.Duration // now - loaded
		takingIn, refusing bool
		held               bool
		cutoff             time.Duration // cutoff - now, when not held
	}{
		{"after a leader change, taking clients in", 10 * time.Second, true, false, true, 0},
		{"after a leader change, refusing", 10 * time.Second, true, true, true, 0},
		{"after a leader change, nobody coming", 10 * time.Second, false, false, false, 0},
		{"past the grace, still refusing", grace, true, true, false, -grace},
		{"steady state, refusing for load", time.Hour, true, true, false, -grace},
		{"steady state, handshakes but no refusal", time.Hour, true, false, false, 0},
		{"steady state, quiet", time.Hour, false, false, false, 0},
	}
	for _, c := range cases {
		now := loaded.Add(c.since)
		cutoff, may := expiryCutoff(now, loaded, grace, c.takingIn, c.refusing)
		if may == c.held {
			t.Errorf("%s: held %v, want %v", c.name, !may, c.held)
			continue
		}
		if may && !cutoff.Equal(now.Add(c.cutoff)) {
			t.Errorf("%s: cutoff now%+v, want now%+v", c.name, cutoff.Sub(now), c.cutoff)
		}
	}
	// A member that never loaded a table (not a leader yet) holds nothing.
	if _, may := expiryCutoff(loaded, time.Time{}, grace, true, false); !may {
		t.Error("held with no table loaded")
	}
}
