package bench

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/client"
)

func TestParseMetrics(t *testing.T) {
	const text = `# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.34
# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 4.2057728e+07
process_resident_memory_bytes_extra 1
go_memstats_heap_inuse_bytes{member="n1"} 99
latch_proposals_total{member="n1",result="ok"} 7
go_memstats_heap_inuse_bytes 1.5e+07 1700000000000
`
	got, err := parseMetrics(strings.NewReader(text), seriesCPU, seriesRSS, "go_memstats_heap_inuse_bytes", "absent_series")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{seriesCPU: 12.34, seriesRSS: 42057728, "go_memstats_heap_inuse_bytes": 1.5e7}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if _, err := parseMetrics(strings.NewReader("process_cpu_seconds_total abc\n"), seriesCPU); err == nil {
		t.Error("a bad value parsed")
	}
}

func TestLeaderAdmin(t *testing.T) {
	for _, tc := range []struct {
		name     string
		members  []client.MemberInfo
		id, addr string
		err      error
	}{
		{"leader's http address", []client.MemberInfo{
			{ID: "n1", HTTPAddr: "127.0.0.1:1001", ClientAddr: "127.0.0.1:2001"},
			{ID: "n2", HTTPAddr: "127.0.0.1:1002", ClientAddr: "127.0.0.1:2002", Leader: true},
		}, "n2", "127.0.0.1:1002", nil},
		{"bound to every interface: the client address's host", []client.MemberInfo{
			{ID: "n1", HTTPAddr: ":7422", ClientAddr: "127.0.0.2:7420", Leader: true},
		}, "n1", "127.0.0.2:7422", nil},
		{"unspecified IP", []client.MemberInfo{
			{ID: "n1", HTTPAddr: "0.0.0.0:7422", ClientAddr: "[::1]:7420", Leader: true},
		}, "n1", "[::1]:7422", nil},
		{"no http address", []client.MemberInfo{{ID: "n1", Leader: true}}, "n1", "", ErrNoAdmin},
		{"no leader", []client.MemberInfo{{ID: "n1", HTTPAddr: "127.0.0.1:1"}}, "", "", ErrNoAdmin},
	} {
		id, addr, err := leaderAdmin(tc.members)
		if id != tc.id || addr != tc.addr || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("%s: %q %q %v; want %q %q %v", tc.name, id, addr, err, tc.id, tc.addr, tc.err)
		}
	}
}

func TestScraperSample(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       sample
		err        error
	}{
		{"live heap from the GC goal", "process_cpu_seconds_total 2.5\nprocess_resident_memory_bytes 1000\n" +
			"go_memstats_next_gc_bytes 3000\ngo_gc_gogc_percent 200\n", sample{cpuSeconds: 2.5, rss: 1000, liveHeap: 1000}, nil},
		{"stacks count in the goal; goroutines", "process_cpu_seconds_total 2.5\nprocess_resident_memory_bytes 1000\n" +
			"go_memstats_next_gc_bytes 3600\ngo_gc_gogc_percent 200\ngo_goroutines 7\ngo_memstats_stack_inuse_bytes 300\n",
			sample{cpuSeconds: 2.5, rss: 1000, liveHeap: 1000, goroutines: 7, stacks: 300}, nil},
		{"no GC series: no live heap", "process_cpu_seconds_total 1\nprocess_resident_memory_bytes 2\n", sample{cpuSeconds: 1, rss: 2}, nil},
		{"GC off: no live heap", "process_cpu_seconds_total 1\nprocess_resident_memory_bytes 2\n" +
			"go_memstats_next_gc_bytes 3000\ngo_gc_gogc_percent -1\n", sample{cpuSeconds: 1, rss: 2}, nil},
		{"no process collector", "go_goroutines 5\n", sample{}, ErrMetrics},
	} {
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/metrics" {
				http.NotFound(w, r)
				return
			}
			io.WriteString(w, tc.body)
		}))
		got, err := newScraper(strings.TrimPrefix(srv.URL, "https://"), 5*time.Second, srv.Client().Transport.(*http.Transport).TLSClientConfig).sample(context.Background())
		srv.Close()
		if got != tc.want || !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
			t.Errorf("%s: %+v, %v; want %+v, %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}

func TestScraperStatus(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/status" {
			http.Error(w, "no", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, `{"id":"n2","state":"Leader","ready":true,"term":7,"members":[]}`)
	}))
	defer srv.Close()
	sc := newScraper(strings.TrimPrefix(srv.URL, "https://"), 5*time.Second, srv.Client().Transport.(*http.Transport).TLSClientConfig)
	st, err := sc.status(context.Background())
	if err != nil || st != (adminStatus{ID: "n2", State: "Leader", Term: 7}) {
		t.Errorf("status %+v, %v", st, err)
	}
	if _, err := sc.sample(context.Background()); !errors.Is(err, ErrMetrics) || !strings.Contains(err.Error(), "503") {
		t.Errorf("a 503 from /metrics: %v, want ErrMetrics naming the status", err)
	}
}
