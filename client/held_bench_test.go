package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// BenchmarkHeldLocks holds many locks on a real latchd and reports what
// they cost the member and how its keepalives fare meanwhile:
//
//	go test ./client -run '^$' -bench HeldLocks -benchtime 1x
//
// server-B/lock is the member's heap in use (after its GC settles) per held
// lock; ka-p50/p99-µs time a KeepAlive round trip on a separate
// connection while the locks are held (ka-idle-p50-µs: before any).
func BenchmarkHeldLocks(b *testing.B) {
	for _, sc := range []struct {
		name                  string
		conns, sessions, each int
	}{
		{"50000-locks-500-sessions-8-conns", 8, 500, 100},
		{"10000-locks-10-sessions-1-conn", 1, 10, 1000},
	} {
		b.Run(sc.name, func(b *testing.B) {
			for range b.N {
				benchHeld(b, sc.conns, sc.sessions, sc.each)
			}
		})
	}
}

func benchHeld(b *testing.B, conns, sessions, each int) {
	c := proc.StartCluster(b, 1)
	c.WaitLeader(b)
	node := c.Nodes[0]
	tlsConf, err := session.ClientTLS(c.Certs.CA, "", "")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	clients := make([]*Client, conns)
	for i := range clients {
		cl, err := Dial(ctx, Config{Endpoints: []string{node.ClientAddr}, TLS: tlsConf, SessionTTL: 10 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		clients[i] = cl
	}
	ss := make([]*Session, sessions)
	for i := range ss {
		s, err := clients[i%conns].NewSession(ctx, 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		ss[i] = s
	}
	probe := keepaliveProbe(b, ctx, node.ClientAddr, tlsConf)
	idle := probe(200)
	before := settledHeap(b, node)

	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	errs := make(chan error, 1)
	for i, s := range ss {
		for j := range each {
			m := NewMutex(s, fmt.Sprintf("/held/%d/%d", i, j))
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if err := m.Lock(ctx); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			})
		}
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	took := time.Since(start)
	b.StopTimer()

	held := probe(200)
	after := settledHeap(b, node)
	n := sessions * each
	for i := range ss {
		select {
		case <-ss[i].Done():
			b.Fatalf("session %d ended while holding: %v", i, ss[i].Err())
		default:
		}
	}
	b.ReportMetric(float64(after-before)/float64(n), "server-B/lock")
	b.ReportMetric(float64(n)/took.Seconds(), "acquires/s")
	b.ReportMetric(float64(idle[len(idle)/2].Microseconds()), "ka-idle-p50-µs")
	b.ReportMetric(float64(held[len(held)/2].Microseconds()), "ka-p50-µs")
	b.ReportMetric(float64(held[len(held)*99/100].Microseconds()), "ka-p99-µs")
}

// keepaliveProbe opens its own connection and session and returns a
// function timing that many KeepAlive round trips, sorted.
func keepaliveProbe(b *testing.B, ctx context.Context, addr string, tlsConf *tls.Config) func(n int) []time.Duration {
	conn, err := session.Dial(ctx, addr, tlsConf, session.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	if _, err := session.Hello(ctx, conn, "probe"); err != nil {
		b.Fatal(err)
	}
	return func(n int) []time.Duration {
		// A session per round: between rounds nothing keeps it alive.
		open, err := session.RoundTrip(ctx, conn, &session.Request{Type: session.MsgOpenSession, TTLMillis: 10000})
		if err != nil || open.Err() != nil {
			b.Fatal(err, open.Err())
		}
		out := make([]time.Duration, n)
		for i := range out {
			t0 := time.Now()
			resp, err := session.RoundTrip(ctx, conn, &session.Request{Type: session.MsgKeepAlive, Session: open.Session})
			if err != nil || resp.Err() != nil {
				b.Fatal(err, resp.Err())
			}
			out[i] = time.Since(t0)
			time.Sleep(5 * time.Millisecond) // a keepalive's pace, not a load test
		}
		slices.Sort(out)
		return out
	}
}

// settledHeap reads the member's go_memstats_heap_inuse_bytes a few times
// a second apart and returns the lowest (its GC runs on its own schedule).
func settledHeap(b *testing.B, n *proc.Node) int64 {
	low := int64(-1)
	for range 5 {
		_, body, err := n.Get("/metrics")
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(strings.NewReader(body))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err == nil && (low < 0 || int64(f) < low) {
					low = int64(f)
				}
			}
		}
		time.Sleep(time.Second)
	}
	if low < 0 {
		b.Fatal("no go_memstats_heap_inuse_bytes in /metrics")
	}
	return low
}
