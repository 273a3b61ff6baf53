package server_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/latch-io/latch/server/proc"
)

// The console's stats stream against three real members: a follower
// relays the leader's samples (?member=), which count the writes and
// reads a load makes and the latency of its requests; a stream opened
// later starts with the samples of the minutes before; an unknown
// member is a clear error.
func TestConsoleStatsStream(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := proc.StartCluster(t, 3)
	li := c.WaitLeader(t)
	leader, f := c.Nodes[li], c.Nodes[(li+1)%3]
	api := newAPIClient(t, c.Certs.CA)

	// A bounded load through the follower (it forwards to the leader,
	// which answers and counts).
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 20000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := fmt.Sprintf("/stats-k%d", i%50)
			if i < 50 {
				api.raw(f.APIAddr, "POST", "/api/v1/nodes"+p, map[string]any{"data": "v"})
			} else {
				api.raw(f.APIAddr, "PUT", "/api/v1/nodes"+p, map[string]any{"data": fmt.Sprint(i)})
			}
			api.raw(f.APIAddr, "GET", "/api/v1/nodes"+p, nil)
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
	}()

	// Members record their API addresses through the log once the
	// cluster runs: until then the relay says it does not know it.
	var s *sseStream
	for deadline := time.Now().Add(proc.WaitTimeout); ; {
		var err error
		if s, err = api.sse(f.APIAddr, "/api/v1/stats/events?member="+leader.ID, ""); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // polling with a deadline
	}
	defer s.close()
	h := s.next(t, 20*time.Second, "history")
	if h.Data.str("member") != leader.ID || h.Data.num("interval_ms") != 1000 {
		t.Fatalf("history of %q every %v ms, want %s every 1000", h.Data.str("member"), h.Data["interval_ms"], leader.ID)
	}
	var seen apiReply
	for deadline := time.Now().Add(60 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatalf("no sample of the leader showed the load: last %v", seen)
		}
		seen = s.next(t, 20*time.Second, "sample").Data
		if seen.str("member") != leader.ID {
			t.Fatalf("a sample of %q on the stream of %s", seen.str("member"), leader.ID)
		}
		if f, _ := seen["writes"].(float64); f <= 0 {
			continue
		}
		if f, _ := seen["reads"].(float64); f <= 0 {
			continue
		}
		p50, ok50 := seen["p50_ms"].(float64)
		p99, ok99 := seen["p99_ms"].(float64)
		if !ok50 || !ok99 {
			continue
		}
		if p50 <= 0 || p99 < p50 {
			t.Fatalf("p50 %v ms, p99 %v ms", p50, p99)
		}
		if seen["sessions"] == nil {
			continue // read every second only while a stream is open: the next one has it
		}
		break
	}
	if leaderFlag, _ := seen["leader"].(bool); !leaderFlag {
		// A leader change under load on a busy machine: the sample is the
		// old leader's, and says so.
		t.Logf("the sampled member is no longer the leader: %v", seen)
	}

	// The follower's own stream: its samples, its id.
	own, err := api.sse(f.APIAddr, "/api/v1/stats/events", "")
	if err != nil {
		t.Fatal(err)
	}
	defer own.close()
	if m := own.next(t, 20*time.Second, "history").Data.str("member"); m != f.ID {
		t.Fatalf("a member's own stream is %q's, want %s", m, f.ID)
	}

	// A page opened a few seconds later gets those seconds first, in order.
	for seen.num("seq") < 5 {
		seen = s.next(t, 20*time.Second, "sample").Data
	}
	later, err := api.sse(leader.APIAddr, "/api/v1/stats/events", "")
	if err != nil {
		t.Fatal(err)
	}
	defer later.close()
	samples := later.next(t, 20*time.Second, "history").Data.list("samples")
	if len(samples) < 5 {
		t.Fatalf("history of %d samples after 5 were taken: %v", len(samples), samples)
	}
	var last float64
	busy := false
	for _, x := range samples {
		smp := x.(map[string]any)
		if seq := smp["seq"].(float64); seq <= last {
			t.Fatalf("history out of order: seq %v after %v", seq, last)
		} else {
			last = seq
		}
		if w, _ := smp["writes"].(float64); w > 0 {
			busy = true
		}
	}
	if !busy {
		t.Fatalf("the history shows no writes: %v", samples)
	}

	if code, out, err := api.raw(f.APIAddr, "GET", "/api/v1/stats/events?member=nobody", nil); err != nil || code != 404 || out.str("name") != "NoMember" {
		t.Fatalf("stats of an unknown member: %d %v %v", code, out, err)
	}
}
