package server_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// TestBoundsProcess replays two findings of issue 27 against a real latchd
// process, reading what it counts on /metrics: unread watches of long
// paths held 1.07 GB (the cap counted events), and wrong-secret resumes
// were answered at 16,000 a second.
func TestBoundsProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	const maxBytes = 1 << 20
	c := proc.StartCluster(t, 1, "--max-watch-backlog-bytes", strconv.Itoa(maxBytes), "--max-failed-resumes-per-host", "5")
	c.WaitLeader(t)
	nd := c.Nodes[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tlsConf, err := session.ClientTLS(c.Certs.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	rawConn := func() *session.Conn {
		t.Helper()
		conn, err := session.Dial(ctx, nd.ClientAddr, tlsConf, session.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		if _, err := session.Hello(ctx, conn, "bounds-test"); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	cl, err := client.Dial(ctx, client.Config{Endpoints: []string{nd.ClientAddr}, TLS: tlsConf, SessionTTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	metrics := func() string {
		t.Helper()
		code, body, err := nd.Get("/metrics")
		if err != nil || code != 200 {
			t.Fatalf("/metrics: %d %v", code, err)
		}
		return body
	}

	t.Run("watch bytes", func(t *testing.T) {
		const conns, watches, creates = 4, 100, 80
		if _, err := cl.Create(ctx, "/w", nil); err != nil {
			t.Fatal(err)
		}
		var streams []*session.StreamReader
		for range conns {
			conn := rawConn()
			for range watches {
				sr, err := session.OpenStreaming(ctx, conn, &session.Request{Type: session.MsgWatch, Path: "/w", Kind: session.WatchRecursive})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := sr.Next(); err != nil { // the acknowledgement; nothing more is read
					t.Fatal(err)
				}
				streams = append(streams, sr)
			}
		}
		defer func() {
			for _, sr := range streams {
				sr.Close()
			}
		}()
		// 400 watches x 80 creates of 1,000-byte names: about 35 MB of
		// events if nothing bounded them.
		long := strings.Repeat("y", 990)
		peak := 0.0
		for i := range creates {
			if _, err := cl.Create(ctx, fmt.Sprintf("/w/%s-%04d", long, i), nil); err != nil {
				t.Fatal(err)
			}
			peak = max(peak, sample(metrics(), `latch_watch_backlog_bytes{member="n1"}`))
		}
		body := metrics()
		if limit := sample(body, `latch_cap_limit{cap="max-watch-backlog-bytes",member="n1"}`); limit != maxBytes {
			t.Fatalf("cap limit on /metrics = %v, want %d", limit, maxBytes)
		}
		if peak <= 0 || peak > maxBytes+conns*watches*48 {
			t.Fatalf("watches held %v bytes at the peak, cap %d", peak, maxBytes)
		}
		if n := sample(body, `latch_watch_backlog_resyncs_total{member="n1"}`); n <= 0 {
			t.Fatalf("no watch was resynced for the byte cap (peak %v bytes)", peak)
		}
		t.Logf("peak %v bytes held for %d unread watches (cap %d)", peak, conns*watches, maxBytes)
	})

	t.Run("failed resumes", func(t *testing.T) {
		owner := rawConn()
		open, err := session.RoundTrip(ctx, owner, &session.Request{Type: session.MsgOpenSession, TTLMillis: 30000})
		if err != nil || open.Err() != nil {
			t.Fatal(err, open.Err())
		}
		id := open.Session
		resume := func(conn *session.Conn, secret []byte) error {
			t.Helper()
			resp, err := session.RoundTrip(ctx, conn, &session.Request{Type: session.MsgResumeSession, Session: id, Secret: secret})
			if err != nil {
				t.Fatal(err)
			}
			return resp.Err()
		}
		wrong := []byte("not the secret!!")
		refused := 0
		for range 10 {
			conn := rawConn()
			for range 10 {
				err := resume(conn, wrong)
				if !errors.Is(err, session.ErrBadSecret) {
					t.Fatalf("a wrong secret = %v, want ErrBadSecret", err)
				}
				if strings.Contains(err.Error(), "resume refused") {
					refused++
				}
			}
			conn.Close()
		}
		if refused == 0 {
			t.Fatal("100 wrong-secret resumes from one host, none refused by the limiter")
		}
		body := metrics()
		byLimiter := sample(body, `latch_resume_refused_total{by="connection",member="n1"}`) +
			sample(body, `latch_resume_refused_total{by="host",member="n1"}`)
		if byLimiter < float64(refused) || sample(body, `latch_resume_failures_total{member="n1"}`) <= 0 {
			t.Fatalf("/metrics counts %v refusals by the limiter, the client saw %d", byLimiter, refused)
		}
		// The session's own client, on the throttled host, still resumes
		// with the right secret on a new connection, and its first
		// connection's keepalives go on.
		if err := resume(rawConn(), open.Secret); err != nil {
			t.Fatalf("the right secret from the throttled host: %v", err)
		}
		ka, err := session.RoundTrip(ctx, owner, &session.Request{Type: session.MsgKeepAlive, Session: id})
		if err != nil || ka.Err() != nil {
			t.Fatalf("keepalive after the flood: %v %v", err, ka.Err())
		}
		t.Logf("%d of 100 wrong-secret resumes refused by the limiter", refused)
	})
}

// sample returns the value of series (name and labels as exposed) in a
// /metrics body, or -1 when it is absent.
func sample(body, series string) float64 {
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			if v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
				return v
			}
		}
	}
	return -1
}
