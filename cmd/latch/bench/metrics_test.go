package bench

import (
	"errors"
	"strings"
	"testing"

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
	got, err := parseMetrics(strings.NewReader(text), seriesCPU, seriesRSS, seriesHeap, "absent_series")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{seriesCPU: 12.34, seriesRSS: 42057728, seriesHeap: 1.5e7}
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
