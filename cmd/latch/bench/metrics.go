package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/latch-io/latch/client"
)

// Series the sessions scenario reads from the leader's /metrics: the
// Prometheus process collector's (Linux only) and the Go collector's.
const (
	seriesCPU  = "process_cpu_seconds_total"
	seriesRSS  = "process_resident_memory_bytes"
	seriesGoal = "go_memstats_next_gc_bytes"
	seriesGOGC = "go_gc_gogc_percent"
	// Goroutines and their stacks: what each connection costs besides
	// its heap.
	seriesGoroutines = "go_goroutines"
	seriesStacks     = "go_memstats_stack_inuse_bytes"
)

// sample is one scrape of the leader's process figures.
type sample struct {
	cpuSeconds float64
	rss        float64
	// liveHeap estimates the heap that survived the last GC: the GC goal
	// is about live + (live + stacks) × GOGC/100 (Go counts goroutine
	// stacks in the goal since 1.18). Unlike RSS or the heap in use it
	// does not swing with garbage not yet collected. 0 when the series
	// are absent.
	liveHeap float64
	// goroutines and stacks (bytes in use) of the process; 0 when absent.
	goroutines, stacks float64
}

// scraper reads one member's /metrics and /v1/status over HTTPS (the
// admin endpoint), trusting the roots of the run's client TLS config (the
// cluster CA when the client listeners share it). It keeps no idle
// connection, so nothing outlives the run.
type scraper struct {
	addr string
	hc   *http.Client
}

func newScraper(addr string, timeout time.Duration, clientTLS *tls.Config) *scraper {
	var conf *tls.Config
	if clientTLS != nil {
		conf = clientTLS.Clone()
		conf.NextProtos = nil // the client's is QUIC's ALPN
	}
	return &scraper{addr: addr, hc: &http.Client{
		Timeout:   timeout,
		Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil, TLSClientConfig: conf},
	}}
}

func (s *scraper) sample(ctx context.Context) (sample, error) {
	var vals map[string]float64
	err := s.get(ctx, "/metrics", func(r io.Reader) error {
		var err error
		vals, err = parseMetrics(r, seriesCPU, seriesRSS, seriesGoal, seriesGOGC, seriesGoroutines, seriesStacks)
		return err
	})
	if err != nil {
		return sample{}, err
	}
	for _, name := range []string{seriesCPU, seriesRSS} {
		if _, ok := vals[name]; !ok {
			return sample{}, fmt.Errorf("%w: %s/metrics has no %s (the process collector reports it on Linux only)", ErrMetrics, s.addr, name)
		}
	}
	smp := sample{cpuSeconds: vals[seriesCPU], rss: vals[seriesRSS], goroutines: vals[seriesGoroutines], stacks: vals[seriesStacks]}
	if gogc, ok := vals[seriesGOGC]; ok && gogc > 0 {
		smp.liveHeap = max(0, vals[seriesGoal]-smp.stacks*gogc/100) / (1 + gogc/100)
	}
	return smp, nil
}

// handshakes reads the member's latch_client_handshakes_total: client
// connections it accepted, resumed and full; ok is false when it has no
// such series (an older latchd).
func (s *scraper) handshakes(ctx context.Context, member string) (resumed, full int, ok bool, err error) {
	series := func(r string) string {
		return `latch_client_handshakes_total{member="` + member + `",resumed="` + r + `"}`
	}
	var vals map[string]float64
	err = s.get(ctx, "/metrics", func(r io.Reader) error {
		var err error
		vals, err = parseMetrics(r, series("true"), series("false"))
		return err
	})
	t, okT := vals[series("true")]
	f, okF := vals[series("false")]
	return int(t), int(f), okT && okF, err
}

// adminStatus is what the run needs of a member's GET /v1/status.
type adminStatus struct {
	ID    string `json:"id"`
	State string `json:"state"`
	Term  uint64 `json:"term"`
	PID   int    `json:"pid"`
}

// status reads the member's /v1/status: the sessions scenario checks that
// the address it measures is the leader, before and after, in one term.
func (s *scraper) status(ctx context.Context) (adminStatus, error) {
	var st adminStatus
	if err := s.get(ctx, "/v1/status", func(r io.Reader) error { return json.NewDecoder(r).Decode(&st) }); err != nil {
		return st, err
	}
	return st, nil
}

func (s *scraper) get(ctx context.Context, path string, read func(io.Reader) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+s.addr+path, nil)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMetrics, err)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMetrics, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: GET %s%s: %s", ErrMetrics, s.addr, path, resp.Status)
	}
	if err := read(resp.Body); err != nil {
		return fmt.Errorf("%w: GET %s%s: %w", ErrMetrics, s.addr, path, err)
	}
	return nil
}

// parseMetrics reads the Prometheus text exposition format from r and
// returns the values of the series named in want that it finds (a
// labelled one named with its labels exactly as exposed). Comments and
// other series are skipped. The caller wraps its errors.
func parseMetrics(r io.Reader, want ...string) (map[string]float64, error) {
	wanted := make(map[string]bool, len(want))
	for _, w := range want {
		wanted[w] = true
	}
	out := make(map[string]float64)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		// name value [timestamp]
		fields := strings.Fields(line)
		if len(fields) < 2 || !wanted[fields[0]] {
			continue
		}
		v, err := strconv.ParseFloat(fields[1], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: bad value %q", fields[0], fields[1])
		}
		out[fields[0]] = v
	}
	return out, sc.Err()
}

// leaderAdmin finds the leader's id and admin address in the member list
// (memberAdmin).
func leaderAdmin(members []client.MemberInfo) (id, addr string, err error) {
	for _, m := range members {
		if !m.Leader {
			continue
		}
		addr, err := memberAdmin(m)
		if err != nil {
			return m.ID, "", fmt.Errorf("%w; give --admin", err)
		}
		return m.ID, addr, nil
	}
	return "", "", fmt.Errorf("%w: no member is marked leader", ErrNoAdmin)
}
