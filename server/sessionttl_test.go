package server_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/servertest"
	"github.com/latch-io/latch/session"
)

// The session TTL bounds are cluster settings (default 1 s to 600 s): a
// 600 s session is granted, lives 600 s of the leader's clock after its
// last keepalive and then expires, all on a manual clock shared by the
// members (no 10-minute wait). A change of the settings through the log
// moves the bounds for the sessions opened after it.
func TestSessionTTLBoundsAreClusterSettings(t *testing.T) {
	clock := session.NewManualClock(time.Now())
	fc := startFrontWith(t, 3, servertest.Options{InMemory: true, Clock: clock})
	leader := fc.WaitLeader()
	conn := fc.dial(leader)
	if l := fc.Server(leader).Store().Limits(); l.MinSessionTTLMillis != 1000 || l.MaxSessionTTLMillis != 600_000 {
		t.Fatalf("default session TTL bounds %d-%d ms, want 1000-600000", l.MinSessionTTLMillis, l.MaxSessionTTLMillis)
	}

	long := openSession(t, conn, 600*time.Second) // granted whole
	if r := ok(t, conn, &session.Request{Type: session.MsgOpenSession, TTLMillis: 3_600_000}); r.TTLMillis != 600_000 {
		t.Fatalf("1h TTL granted as %dms, want the 600s bound", r.TTLMillis)
	}
	if r := ok(t, conn, &session.Request{Type: session.MsgOpenSession, TTLMillis: 10}); r.TTLMillis != 1000 {
		t.Fatalf("10ms TTL granted as %dms, want the 1s bound", r.TTLMillis)
	}
	ok(t, conn, &session.Request{Type: session.MsgCreate, Session: long.Session, Path: "/long", Flags: namespace.FlagEphemeral})
	// The leader's deadline is the full TTL from the open.
	if ms := expiresIn(t, conn, long.Session); ms != 600_000 {
		t.Fatalf("leader's deadline is %dms away, want 600000", ms)
	}

	// 599 s later it is still there; a 1 s witness opened with it is
	// gone, which shows the reaper ran after the clock moved.
	witness := openSession(t, conn, time.Second)
	clock.Advance(599 * time.Second)
	sessionGone(t, fc, leader, witness.Session)
	if _, err := fc.Server(leader).Store().Session(long.Session); err != nil {
		t.Fatalf("the 600s session expired after 599s: %v", err)
	}
	if ms := expiresIn(t, conn, long.Session); ms != 1000 {
		t.Fatalf("leader's deadline is %dms away after 599s, want 1000", ms)
	}
	clock.Advance(1001 * time.Millisecond)
	sessionGone(t, fc, leader, long.Session)
	fails(t, conn, &session.Request{Type: session.MsgGet, Path: "/long"}, namespace.ErrNoNode)

	// Narrower bounds through the log: every member holds them, and new
	// sessions are clamped into them.
	l := fc.Server(leader).Store().Limits()
	l.MinSessionTTLMillis, l.MaxSessionTTLMillis = 2000, 120_000
	if _, err := fc.Server(leader).SetLimits(ctxT(t), l, namespace.AnyVersion); err != nil {
		t.Fatal(err)
	}
	if r := ok(t, conn, &session.Request{Type: session.MsgOpenSession, TTLMillis: 600_000}); r.TTLMillis != 120_000 {
		t.Fatalf("600s TTL granted as %dms under a 120s bound", r.TTLMillis)
	}
	if r := ok(t, conn, &session.Request{Type: session.MsgOpenSession, TTLMillis: 1000}); r.TTLMillis != 2000 {
		t.Fatalf("1s TTL granted as %dms under a 2s bound", r.TTLMillis)
	}
	for i := range fc.N() {
		servertest.Eventually(t, "member holds the new TTL bounds", func() error {
			if got := fc.Server(i).Store().Limits(); got.MinSessionTTLMillis != 2000 || got.MaxSessionTTLMillis != 120_000 {
				return fmt.Errorf("member %d holds %d-%d ms", i, got.MinSessionTTLMillis, got.MaxSessionTTLMillis)
			}
			return nil
		})
	}
	// Bounds that make no sense are refused, naming the setting.
	l.MinSessionTTLMillis, l.MaxSessionTTLMillis = 5000, 4000
	if _, err := fc.Server(leader).SetLimits(ctxT(t), l, namespace.AnyVersion); !errors.Is(err, namespace.ErrBadLimits) {
		t.Fatalf("max below min: %v", err)
	}
	l.MinSessionTTLMillis, l.MaxSessionTTLMillis = 0, 4000
	if _, err := fc.Server(leader).SetLimits(ctxT(t), l, namespace.AnyVersion); !errors.Is(err, namespace.ErrBadLimits) {
		t.Fatalf("zero min: %v", err)
	}
}

// expiresIn is the lease left of session id as the leader reports it.
func expiresIn(t *testing.T, conn *session.Conn, id uint64) int64 {
	t.Helper()
	for _, si := range ok(t, conn, &session.Request{Type: session.MsgSessions}).Sessions {
		if si.ID == id {
			return si.ExpiresInMillis
		}
	}
	t.Fatalf("session %d not listed", id)
	return 0
}
