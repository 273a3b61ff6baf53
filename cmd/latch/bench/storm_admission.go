package bench

// The admission counters storm reads from the members' metrics.

import (
	"io"
	"strconv"
	"strings"
	"time"
)

// admissionCount is a member's admission counters at one moment.
type admissionCount struct {
	sc                            *scraper
	id                            string
	refused, res, full, abandoned int
	reserved, used, expired, busy int
	waited                        time.Duration
}

// admissionCounters reads the admission counters of every member but
// skip.
func (r *runner) admissionCounters(skip string) map[string]admissionCount {
	admins, _ := r.adminScrapers(r.cfg.OpTimeout)
	out := map[string]admissionCount{}
	for _, a := range admins {
		if a.id == skip {
			continue
		}
		c := admissionCount{sc: a.sc, id: a.id}
		out[a.id] = c.read(r)
	}
	return out
}

// read returns c's counters now.
func (c admissionCount) read(r *runner) admissionCount {
	ctx, cancel := r.opCtx()
	defer cancel()
	n := admissionCount{sc: c.sc, id: c.id}
	// One scrape for every series: a member under a storm answers slowly,
	// and a scrape per series ran past the deadline.
	var body []byte
	_ = c.sc.get(ctx, "/metrics", func(rd io.Reader) error {
		var err error
		body, err = io.ReadAll(rd)
		return err
	})
	text := string(body)
	n.refused = int(sumLabeled(text, "latch_admission_refused_total", ""))
	n.abandoned = int(sumLabeled(text, "latch_admission_handshakes_total", `end="abandoned"`))
	n.reserved = int(sumLabeled(text, "latch_admission_reservations_total", `event="made"`))
	n.used = int(sumLabeled(text, "latch_admission_reservations_total", `event="used"`))
	n.expired = int(sumLabeled(text, "latch_admission_reservations_total", `event="expired"`))
	n.busy = int(sumLabeled(text, "latch_admission_reservations_total", `event="busy"`))
	n.waited = time.Duration(sumLabeled(text, "latch_admission_queue_wait_seconds_total", "") * float64(time.Second))
	n.res, n.full, _, _ = c.sc.handshakes(ctx, c.id)
	return n
}

// sumLabeled sums the samples of the series name in the Prometheus text
// whose labels include label (`end="abandoned"`; "" for all). The
// exposition sorts labels by name, so a label is not always first.
func sumLabeled(text, name, label string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		end := strings.LastIndexByte(rest, '}')
		if label != "" && (end < 0 || !strings.Contains(rest[:end], label)) {
			continue
		}
		fields := strings.Fields(rest[end+1:])
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
			sum += v
		}
	}
	return sum
}
