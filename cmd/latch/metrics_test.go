package main

import (
	"context"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/server/proc"
)

// TestMetrics drives a real member through sessions (one expired), locks
// (held, waiting), a watch and requests, and reads /metrics: each series
// moves as it should, and the README's metrics table lists exactly the
// latch_* series the member exports.
func TestMetrics(t *testing.T) {
	c := proc.StartCluster(t, 1)
	c.WaitLeader(t)
	useCluster(t, c)
	nd := c.Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*proc.WaitTimeout)
	defer cancel()
	cl := dialProc(t, c)

	holder, err := cl.NewSession(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.NewMutex(holder, "/m/lock").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	waiter, err := cl.NewSession(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	go client.NewMutex(waiter, "/m/lock").Lock(waitCtx)
	w, err := cl.Watch(ctx, "/m", client.Recursive())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	doomed, err := cl.NewSession(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	doomed.Orphan()
	for i := range 5 {
		if _, err := cl.Create(ctx, "/m/k"+strconv.Itoa(i), nil); err != nil {
			t.Fatal(err)
		}
	}

	var body string
	waitFor(t, "metrics", func() bool {
		_, body, err = nd.Get("/metrics")
		return err == nil && metric(body, `latch_sessions_total{event="expired",member="n1"}`) >= 1 &&
			metric(body, `latch_locks_waiting{member="n1"}`) == 1
	})
	for _, want := range []struct {
		series string
		min    float64
	}{
		{`latch_sessions_open{member="n1"}`, 3},
		{`latch_sessions_total{event="opened",member="n1"}`, 4},
		{`latch_locks_held{member="n1"}`, 1},
		{`latch_lock_grants_total{member="n1"}`, 1},
		{`latch_watches_active{member="n1"}`, 1},
		{`latch_connections_open{member="n1"}`, 1},
		{`latch_requests_total{member="n1",result="ok",type="Create"}`, 5},
		{`latch_request_duration_seconds_count{member="n1",type="Create"}`, 5},
	} {
		if got := metric(body, want.series); got < want.min {
			t.Errorf("%s = %v, want at least %v", want.series, got, want.min)
		}
	}
	if got := metric(body, `latch_locks_delayed{member="n1"}`); got != 0 {
		t.Errorf("latch_locks_delayed = %v with no expired holder", got)
	}

	// The README documents every latch_* series, and only those.
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(latch_[a-z_]+)`").FindAllStringSubmatch(string(readme), -1) {
		documented[m[1]] = true
	}
	exported := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (latch_[a-z_]+) (\w+)`).FindAllStringSubmatch(body, -1) {
		exported[m[1]] = true
	}
	var missing, stale []string
	for n := range exported {
		if !documented[n] {
			missing = append(missing, n)
		}
	}
	for n := range documented {
		if !exported[n] {
			stale = append(stale, n)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 || len(stale) > 0 {
		t.Fatalf("README metrics table: missing %v; listed but not exported %v", missing, stale)
	}
}

// metric returns the value of the series (name with its labels as
// Prometheus prints them) in a /metrics body, or -1.
func metric(body, series string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}
