package bench

import "testing"

// TestSumLabeled: a label that sorts after member is still found (the
// storm report once read 0 reservations and 0 abandoned handshakes from
// members that had thousands), other series and other label values are
// not summed.
func TestSumLabeled(t *testing.T) {
	text := `# HELP latch_admission_reservations_total x
latch_admission_reservations_total{event="made",member="n1"} 502
latch_admission_reservations_total{event="used",member="n1"} 501
latch_admission_handshakes_total{end="abandoned",member="n1"} 34
latch_admission_handshakes_total{end="full",member="n1"} 7
latch_admission_refused_total{member="n1",reason="in_flight"} 10
latch_admission_refused_total{member="n1",reason="rate"} 2
latch_admission_refused_total_extra{member="n1"} 99
latch_admission_queue_wait_seconds_total{member="n1"} 1.5
`
	for _, c := range []struct {
		name, label string
		want        float64
	}{
		{"latch_admission_reservations_total", `event="made"`, 502},
		{"latch_admission_reservations_total", `event="used"`, 501},
		{"latch_admission_reservations_total", `event="busy"`, 0},
		{"latch_admission_handshakes_total", `end="abandoned"`, 34},
		{"latch_admission_refused_total", "", 12},
		{"latch_admission_refused_total", `reason="rate"`, 2},
		{"latch_admission_queue_wait_seconds_total", "", 1.5},
	} {
		if got := sumLabeled(text, c.name, c.label); got != c.want {
			t.Errorf("sumLabeled(%s, %s) = %v, want %v", c.name, c.label, got, c.want)
		}
	}
}
