package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server"
	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// Benchmarks of the HTTP/JSON API next to the QUIC front on the same
// 3-member in-process cluster, one request at a time, HTTP and QUIC
// alternating so that machine noise hits both alike:
//
//	go test ./server -run '^$' -bench 'API' -benchtime 2000x
//
// Each reports p50/p99 in milliseconds for both fronts.

func startAPIFront(b *testing.B, configure func(i int, cfg *server.Config)) (*frontCluster, *apiClient, int) {
	fc := startFront(b, 3, func(i int, cfg *server.Config) {
		cfg.APIAddr = "127.0.0.1:0"
		if configure != nil {
			configure(i, cfg)
		}
	})
	return fc, newAPIClient(b, fc.Certs().CA), fc.WaitLeader()
}

// reportPair reports the p50 and p99 of sample sets as name-p50-ms.
func reportPair(b *testing.B, names []string, samples [][]time.Duration) {
	for i, s := range samples {
		if len(s) == 0 {
			continue
		}
		sorted := slices.Clone(s)
		slices.Sort(sorted)
		at := func(q float64) float64 {
			return float64(sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]) / float64(time.Millisecond)
		}
		b.ReportMetric(at(0.50), names[i]+"-p50-ms")
		b.ReportMetric(at(0.99), names[i]+"-p99-ms")
	}
}

// BenchmarkAPIGet: a linearizable get over HTTP/JSON vs over QUIC, both
// on the leader, and over HTTP/JSON through a follower (which forwards
// it to the leader).
func BenchmarkAPIGet(b *testing.B) {
	fc, api, leader := startAPIFront(b, nil)
	addr := fc.Server(leader).APIAddr()
	faddr := fc.Server((leader + 1) % 3).APIAddr()
	conn := fc.dial(leader)
	ok(b, conn, &session.Request{Type: session.MsgCreate, Path: "/bench", Data: []byte("value")})
	api.do(200, addr, "GET", "/api/v1/nodes/bench", nil) // warm the connections
	api.do(200, faddr, "GET", "/api/v1/nodes/bench", nil)
	samples := make([][]time.Duration, 3)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		api.do(200, addr, "GET", "/api/v1/nodes/bench", nil)
		samples[0] = append(samples[0], time.Since(start))
		start = time.Now()
		ok(b, conn, &session.Request{Type: session.MsgGet, Path: "/bench"})
		samples[1] = append(samples[1], time.Since(start))
		start = time.Now()
		api.do(200, faddr, "GET", "/api/v1/nodes/bench", nil)
		samples[2] = append(samples[2], time.Since(start))
	}
	b.StopTimer()
	reportPair(b, []string{"http", "quic", "http-via-follower"}, samples)
}

// BenchmarkAPILockAcquire: an uncontended exclusive acquire (request to
// grant) over HTTP/JSON vs over QUIC, both for a session on the leader;
// each is released before the next (not timed).
func BenchmarkAPILockAcquire(b *testing.B) {
	fc, api, leader := startAPIFront(b, nil)
	addr := fc.Server(leader).APIAddr()
	s := api.do(201, addr, "POST", "/api/v1/sessions", map[string]any{"ttl_ms": 60000})
	hdr := "Latch-Session: " + s.str("token")
	conn := fc.dial(leader)
	qs := ok(b, conn, &session.Request{Type: session.MsgOpenSession, TTLMillis: 60000}).Session
	samples := make([][]time.Duration, 2)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		g := api.do(200, addr, "POST", "/api/v1/locks/bench/http/acquire", map[string]any{}, hdr)
		samples[0] = append(samples[0], time.Since(start))
		b.StopTimer()
		api.do(200, addr, "POST", "/api/v1/locks/bench/http/release", map[string]any{"node": g.str("node")}, hdr)
		b.StartTimer()

		start = time.Now()
		sr, err := session.OpenStreaming(wireCtx(b), conn, &session.Request{Type: session.MsgLock, Path: "/bench/quic", Session: qs, Mode: session.LockExclusive})
		if err != nil {
			b.Fatal(err)
		}
		var node string
		for {
			resp, err := sr.Next()
			if err != nil {
				b.Fatal(err)
			}
			if resp.Lock == session.LockGranted {
				node = resp.Node
				break
			}
		}
		samples[1] = append(samples[1], time.Since(start))
		b.StopTimer()
		ok(b, conn, &session.Request{Type: session.MsgLockRelease, Node: node, Session: qs})
		sr.Close()
		b.StartTimer()
	}
	b.StopTimer()
	reportPair(b, []string{"http", "quic"}, samples)
}

// BenchmarkAPIWatchDelay measures commit-to-event over SSE: from the
// moment the leader applied a write (its observer's clock) to the moment
// a client reading the event stream on the leader has the event.
func BenchmarkAPIWatchDelay(b *testing.B) {
	times := applyTimes{mu: &sync.Mutex{}, at: map[[2]uint64]time.Time{}}
	fc, api, leader := startAPIFront(b, func(i int, cfg *server.Config) {
		t := times
		t.member = i
		cfg.Observer = t
	})
	addr := fc.Server(leader).APIAddr()
	conn := fc.dial(leader)
	ok(b, conn, &session.Request{Type: session.MsgCreate, Path: "/bench"})
	w, err := api.sse(addr, "/api/v1/watch/bench", "")
	if err != nil {
		b.Fatal(err)
	}
	defer w.close()
	w.next(b, 10*time.Second, "ready")
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		ok(b, conn, &session.Request{Type: session.MsgSet, Path: "/bench", Data: []byte("v"), Version: namespace.AnyVersion})
		ev := w.next(b, 10*time.Second, "change")
		got := time.Now()
		times.mu.Lock()
		applied, found := times.at[[2]uint64{uint64(leader), ev.Data.num("revision")}]
		times.mu.Unlock()
		if !found {
			b.Fatalf("no apply time for %+v", ev)
		}
		samples = append(samples, got.Sub(applied))
	}
	b.StopTimer()
	reportLatency(b, samples)
}

// BenchmarkAPIWatchers opens 1,000 SSE watches on one real latchd
// process and reports its resident memory per watcher, then shows the
// backlog bound: a watcher that stops reading while 8,000 events of
// about 1 KiB are written ends with a resync (what it got is what the
// connection's buffers held plus at most WatchBuffer queued events), and
// the member's memory growth is reported.
//
//	go test ./server -run '^$' -bench APIWatchers -benchtime 1x
func BenchmarkAPIWatchers(b *testing.B) {
	const watchers, stalledEvents = 1000, 8000
	bin := proc.Build(b)
	dir := b.TempDir()
	addrs := proc.FreeAddrs(b, 4)
	cmd := exec.Command(bin, "--dev", "--data-dir", filepath.Join(dir, "d"), "--client-addr", addrs[0], "--raft-addr", addrs[1],
		"--http-addr", addrs[2], "--api-addr", addrs[3], "--log-level", "error")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	ca := filepath.Join(dir, "d", "tls", "ca.pem")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(ca); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("latchd --dev made no CA")
		}
		time.Sleep(20 * time.Millisecond) // polling for the file with a deadline
	}
	api := newAPIClient(b, ca)
	for {
		if code, _, err := api.raw(addrs[3], "GET", "/api/v1/health", nil); err == nil && code == 200 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("latchd --dev never ready")
		}
		time.Sleep(20 * time.Millisecond) // polling for readiness with a deadline
	}
	api.do(201, addrs[3], "POST", "/api/v1/nodes/w", nil)
	rss := func() float64 {
		s, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(string(s), "\n") {
			if strings.HasPrefix(line, "VmRSS:") {
				kb, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
				return kb
			}
		}
		b.Fatal("no VmRSS")
		return 0
	}
	for range b.N {
		before := rss()
		var streams []*sseStream
		for i := 0; i < watchers; i++ {
			s, err := api.sse(addrs[3], "/api/v1/watch/w?kind=children", "")
			if err != nil {
				b.Fatal(err)
			}
			streams = append(streams, s)
		}
		for _, s := range streams {
			s.next(b, 30*time.Second, "ready")
		}
		cr := api.do(201, addrs[3], "POST", "/api/v1/nodes/w/x", nil)
		for _, s := range streams {
			if ev := s.next(b, 30*time.Second, "change"); ev.Data.num("revision") != cr.num("revision") {
				b.Fatalf("watcher got %+v", ev)
			}
		}
		after := rss()
		b.ReportMetric((after-before)/watchers, "KiB-RSS/watcher")

		// A stalled reader: a raw stream nobody reads while events flow.
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+addrs[3]+"/api/v1/watch/w?kind=recursive", nil)
		hc := &http.Client{Transport: api.hc.Transport}
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range streams {
			s.close()
		}
		// Long paths make each event about 1 KiB, so that 8,000 of them
		// overflow what the connection's flow-control window and socket
		// buffers hold, and the hub's per-watch queue is what is left.
		long := "/api/v1/nodes/w/" + strings.Repeat("x", 900)
		api.do(201, addrs[3], "POST", long, nil)
		stalled := rss()
		for i := 0; i < stalledEvents; i++ {
			api.do(200, addrs[3], "PUT", long, map[string]any{"data": "v"})
		}
		b.ReportMetric((rss()-stalled)/1024, "MiB-RSS-growth-stalled")
		// Now read it: the stream ends with a resync, not 3,000 events.
		events, resync := 0, false
		stop := time.AfterFunc(10*time.Second, cancel) // a stream that never resyncs
		defer stop.Stop()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			switch sc.Text() {
			case "event: change":
				events++
			case "event: resync":
				resync = true
			}
		}
		resp.Body.Close()
		cancel()
		b.ReportMetric(float64(events), "events-before-resync")
		if !resync {
			b.Logf("the stalled watcher got all %d events (the connection's buffers held them)", events)
		}
	}
}
