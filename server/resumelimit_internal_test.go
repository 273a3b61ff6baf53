package server

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latch-io/latch/session"
)

// Session resumes with a wrong secret were not throttled (16,000 a second
// from one process). Here a flood of wrong-secret resumes from one host
// (loopback), over many connections, is answered with refusals once the
// host's and each connection's tokens are spent, while the session's
// owner resumes with the right secret at once, from the same host,
// whenever it tries. The limiter's clock is frozen, so the count of
// failures it let through is exact: the host's burst.
func TestFailedResumesThrottled(t *testing.T) {
	const perHost = 4 // burst 8
	// The member's monotonic clock stands still but for the test's step:
	// the limiter's tokens refill only when the test says so.
	var clock atomic.Int64
	s := startDevWith(t, func(c *Config) {
		c.MaxFailedResumesPerHost = perHost
		c.Monotonic = func() time.Duration { return time.Duration(clock.Load()) }
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	owner, err := rawConn(t, ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	open, err := session.RoundTrip(ctx, owner, &session.Request{Type: session.MsgOpenSession, TTLMillis: 30000})
	if err != nil || open.Err() != nil {
		t.Fatal(err, open.Err())
	}
	resume := func(secret []byte) error {
		t.Helper()
		c, err := rawConn(t, ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		resp, err := session.RoundTrip(ctx, c, &session.Request{Type: session.MsgResumeSession, Session: open.Session, Secret: secret})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Err()
	}

	wrong := []byte("0123456789abcdef")
	plain, refused := 0, 0
	flood := func(conns, perConn int) {
		t.Helper()
		for range conns {
			c, err := rawConn(t, ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			for range perConn {
				resp, err := session.RoundTrip(ctx, c, &session.Request{Type: session.MsgResumeSession, Session: open.Session, Secret: wrong})
				if err != nil {
					t.Fatal(err)
				}
				switch err := resp.Err(); {
				case !errors.Is(err, session.ErrBadSecret):
					t.Fatalf("a wrong secret resumed, or failed otherwise: %v", err)
				case strings.Contains(err.Error(), "resume refused"):
					refused++
				default:
					plain++
				}
			}
			c.Close()
		}
	}
	flood(5, 10)
	if plain != 2*perHost {
		t.Fatalf("%d wrong secrets were looked at, want the host's burst %d", plain, 2*perHost)
	}
	if st := s.front.quic.Stats(); refused != 50-plain || st.ResumeRefusedConn == 0 || st.ResumeRefusedHost == 0 {
		t.Fatalf("%d attempts refused by the limiter (by connection %d, by host %d), want %d and both",
			refused, st.ResumeRefusedConn, st.ResumeRefusedHost, 50-plain)
	}
	// The host is out of tokens, and its owner still resumes at once.
	if err := resume(open.Secret); err != nil {
		t.Fatalf("the right secret, from a throttled host: %v", err)
	}
	// A refusal by the host names the flag that sets the rate.
	if err := resume(wrong); !strings.Contains(fmtErr(err), "--max-failed-resumes-per-host") {
		t.Fatalf("refusal by the host: %v", err)
	}
	// It is a rate, not a ban: a second later the host has tokens again.
	clock.Add(int64(time.Second))
	plain, refused = 0, 0
	flood(1, 10)
	if plain != perHost || refused != 10-perHost {
		t.Fatalf("a second later: %d looked at, %d refused; want %d and %d", plain, refused, perHost, 10-perHost)
	}
	if err := resume(open.Secret); err != nil {
		t.Fatalf("the right secret after the second flood: %v", err)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
