package server_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server"
	"github.com/latch-io/latch/server/servertest"
	"github.com/latch-io/latch/session"
)

// A session expires one TTL after its last keepalive on the leader's
// clock, not earlier (not a TTL after its open) and not later; its
// ephemeral goes with it, on every member; a session that kept renewing
// lives on. Time is a clock the test moves (TTLs are not waited out); a
// witness session shows when the reaper has looked after a move.
func TestExpiryEndsSilentSession(t *testing.T) {
	const ttl = time.Second
	clock := session.NewManualClock(time.Now())
	fc := startFrontWith(t, 3, servertest.Options{InMemory: true, Clock: clock, Configure: func(_ int, cfg *server.Config) {
		cfg.Limits.MinSessionTTLMillis = 100
	}})
	leader := fc.WaitLeader()
	conn := fc.dial(leader)
	ok(t, conn, &session.Request{Type: session.MsgCreate, Path: "/e"})
	silent := openSession(t, conn, ttl)
	alive := openSession(t, conn, ttl)
	ok(t, conn, &session.Request{Type: session.MsgCreate, Session: silent.Session, Path: "/e/silent", Flags: namespace.FlagEphemeral})
	ok(t, conn, &session.Request{Type: session.MsgCreate, Session: alive.Session, Path: "/e/alive", Flags: namespace.FlagEphemeral})
	w := watch(t, fc.dial(follower(fc, leader)), &session.Request{Path: "/e/silent", Kind: session.WatchExists, FromRev: silent.Rev})
	expectEvents(t, w.next(1), ev{namespace.EventCreated, "/e/silent"}) // replayed
	keepAlive := func(id uint64) {
		t.Helper()
		ok(t, conn, &session.Request{Type: session.MsgKeepAlive, Session: id})
	}
	exists := func() bool {
		t.Helper()
		return ok(t, conn, &session.Request{Type: session.MsgExists, Path: "/e/silent"}).Exists
	}

	// The last keepalive comes half a TTL after the open: the deadline is
	// t0+1.5s.
	clock.Advance(ttl / 2)
	keepAlive(silent.Session)
	keepAlive(alive.Session)
	witness := openSession(t, conn, 100*time.Millisecond)
	clock.Advance(ttl - time.Millisecond)
	sessionGone(t, fc, leader, witness.Session)
	if !exists() {
		t.Fatalf("expired a TTL after its open, %v after its last keepalive (TTL %v)", ttl-time.Millisecond, ttl)
	}
	keepAlive(alive.Session)

	clock.Advance(2 * time.Millisecond) // 1ms past the deadline
	servertest.Eventually(t, "silent session expired", func() error {
		if exists() {
			return errors.New("its ephemeral still exists")
		}
		return nil
	})
	got := w.next(1)
	expectEvents(t, got, ev{namespace.EventDeleted, "/e/silent"})
	if got[0].Session != silent.Session {
		t.Fatalf("deleted event names session %d, want %d", got[0].Session, silent.Session)
	}
	for i := range fc.N() {
		sessionGone(t, fc, i, silent.Session)
	}
	fails(t, conn, &session.Request{Type: session.MsgKeepAlive, Session: silent.Session}, session.ErrSessionExpired)
	fails(t, fc.dial(leader), &session.Request{Type: session.MsgResumeSession, Session: silent.Session, Secret: silent.Secret}, session.ErrSessionExpired)
	// The session that kept renewing lives on.
	ok(t, conn, &session.Request{Type: session.MsgGet, Path: "/e/alive"})
	keepAlive(alive.Session)
}

// sessionGone polls member i until session id is gone from its namespace.
func sessionGone(t *testing.T, fc *frontCluster, i int, id uint64) {
	t.Helper()
	servertest.Eventually(t, fmt.Sprintf("session %d expired", id), func() error {
		if _, err := fc.Server(i).Store().Session(id); !errors.Is(err, namespace.ErrNoSession) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
}

// A new leader gives every session a full TTL from its takeover, so a
// session whose old deadline passed during the failover is not expired;
// it also rebuilds the per-identity session counts. Time is a manual
// clock shared by the members; the reaper looks every tick.
func TestExpiryLeaderChangeGivesFreshTTL(t *testing.T) {
	clock := session.NewManualClock(time.Now())
	fc := startFrontWith(t, 3, servertest.Options{InMemory: true, Clock: clock, Configure: func(_ int, cfg *server.Config) {
		cfg.Limits.MinSessionTTLMillis = 100
		cfg.MaxSessionsPerIdentity = 3
		cfg.MaxAnonymousSessions = 3 // the test's clients have no certificate: counted per host
	}})
	old := fc.WaitLeader()
	conn := fc.dial(old)
	kept := openSession(t, conn, 2*time.Second) // deadline t0+2s
	victim := openSession(t, conn, time.Second) // deadline t0+1s
	ok(t, conn, &session.Request{Type: session.MsgCreate, Session: kept.Session, Path: "/kept", Flags: namespace.FlagEphemeral})

	clock.Advance(1500 * time.Millisecond) // t0+1.5s: only the victim is due
	sessionGone(t, fc, old, victim.Session)
	ok(t, conn, &session.Request{Type: session.MsgGet, Path: "/kept"})

	fc.Stop(old)
	leader := fc.WaitLeader()
	conn = fc.dial(leader)
	// The new leader counted one session for this anonymous host (the
	// host is recorded with the session).
	second := openSession(t, conn, time.Second) // deadline t0+2.5s
	openSession(t, conn, 5*time.Second)
	fails(t, conn, &session.Request{Type: session.MsgOpenSession, TTLMillis: 1000}, session.ErrTooManySessions)

	// t0+2.6s: past kept's old deadline, not past takeover+TTL. The
	// second session's expiry shows the reaper ran after the clock moved.
	clock.Advance(1100 * time.Millisecond)
	sessionGone(t, fc, leader, second.Session)
	if _, err := fc.Server(leader).Store().Session(kept.Session); err != nil {
		t.Fatalf("session expired by the new leader before a full TTL: %v", err)
	}
	ok(t, conn, &session.Request{Type: session.MsgResumeSession, Session: kept.Session, Secret: kept.Secret})
	ok(t, conn, &session.Request{Type: session.MsgKeepAlive, Session: kept.Session}) // deadline t0+4.6s
	ok(t, conn, &session.Request{Type: session.MsgOpenSession, TTLMillis: 1000})     // a slot was freed

	clock.Advance(2100 * time.Millisecond)
	sessionGone(t, fc, leader, kept.Session)
	fails(t, conn, &session.Request{Type: session.MsgGet, Path: "/kept"}, namespace.ErrNoNode)
}
