package server_test

import (
	"errors"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server"
	"github.com/latch-io/latch/server/servertest"
	"github.com/latch-io/latch/session"
)

// TestLockWatchHidesUnreadableWaiter: a lock-contended event on a lock the
// client may read names the conflicting request only when the client may
// read that request's node too (here a descendant's lock a rule hides).
func TestLockWatchHidesUnreadableWaiter(t *testing.T) {
	fc := startFront(t, 1, func(_ int, cfg *server.Config) {
		cfg.Admins = []string{""} // the test's clients have no certificate: make them admins, then restrict
	})
	leader := fc.WaitLeader()
	conn := fc.dial(leader)
	srv := fc.Server(leader)
	servertest.Eventually(t, "ACL bootstrap", func() error {
		if !srv.Store().ACL().Enforced {
			return errors.New("ACLs not enforced yet")
		}
		return nil
	})
	a := openSession(t, conn, 10*time.Second).Session
	b := openSession(t, conn, 10*time.Second).Session
	held := ok(t, conn, &session.Request{Type: session.MsgLockCall, Path: "/app/open", Session: a})
	if held.Lock != session.LockGranted {
		t.Fatalf("lock /app/open: %+v", held)
	}
	w := watch(t, conn, &session.Request{Path: "/app/open", Kind: session.WatchLocks})
	// First a waiter the client may read: named.
	q1 := ok(t, conn, &session.Request{Type: session.MsgLockCall, Path: "/app/open/seen", Session: b})
	got := w.next(1)
	if got[0].Type != namespace.EventLockContended || got[0].Path != held.Node || got[0].Waiter != q1.Node || got[0].WaiterSession != b {
		t.Fatalf("contended by a readable waiter: %+v (holder %s, waiter %s)", got[0], held.Node, q1.Node)
	}
	// "" may write and create below /app/open/secret, not read it.
	ok(t, conn, &session.Request{Type: session.MsgACLSet, ACL: []namespace.ACLRule{
		{Identity: "", Prefix: "/app/open/secret", Perms: namespace.PermWrite | namespace.PermCreate}}})
	c := openSession(t, conn, 10*time.Second).Session
	q2 := ok(t, conn, &session.Request{Type: session.MsgLockCall, Path: "/app/open/secret", Session: c})
	if q2.Lock == session.LockGranted {
		t.Fatalf("a lock below a held one granted: %+v", q2)
	}
	got = w.next(1)
	if got[0].Type != namespace.EventLockContended || got[0].Path != held.Node || got[0].Waiter != "" || got[0].WaiterSession != 0 {
		t.Fatalf("contended by an unreadable waiter: %+v", got[0])
	}
}
