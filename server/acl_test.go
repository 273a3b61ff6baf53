package server_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server"
	"github.com/latch-io/latch/server/servertest"
	"github.com/latch-io/latch/session"
)

// TestSessionAndWatchCaps: the cluster-wide session cap, the anonymous
// per-host cap and the per-identity watch cap (across connections) refuse
// with errors naming their flag, and a freed slot is usable again.
func TestSessionAndWatchCaps(t *testing.T) {
	fc := startFront(t, 1, func(_ int, cfg *server.Config) {
		cfg.MaxSessions, cfg.MaxAnonymousSessions, cfg.MaxWatchesPerIdentity = 4, 3, 2
	})
	leader := fc.WaitLeader()
	c1, c2 := fc.dial(leader), fc.dial(leader)

	// Clients without a certificate on one host: 3 sessions, then refused.
	s := []*session.Response{openSession(t, c1, time.Second), openSession(t, c1, time.Second), openSession(t, c2, time.Second)}
	resp := fails(t, c2, &session.Request{Type: session.MsgOpenSession, TTLMillis: 1000}, session.ErrTooManySessions)
	if !strings.Contains(resp.Message, "--max-anonymous-sessions-per-host") {
		t.Fatalf("refusal %q does not name the cap", resp.Message)
	}
	ok(t, c1, &session.Request{Type: session.MsgCloseSession, Session: s[0].Session})
	openSession(t, c2, time.Second) // the freed slot

	// Watches of one identity across its connections: 2, then refused.
	watch(t, c1, &session.Request{Path: "/"})
	watch(t, c2, &session.Request{Path: "/"})
	sr, err := session.OpenStreaming(ctxT(t), c1, &session.Request{Type: session.MsgWatch, Path: "/"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sr.Next()
	if !errors.Is(err, session.ErrTooManyWatches) || !strings.Contains(err.Error(), "--max-watches-per-identity") {
		t.Fatalf("third watch of the identity: %v", err)
	}
	sr.Close()
}

// TestReadsAndWatchesFollowRules: a listing leaves out the children a rule
// denies, a read of one is refused, and a recursive watch never delivers
// an event of an unreadable node.
func TestReadsAndWatchesFollowRules(t *testing.T) {
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
	for _, p := range []string{"/app", "/app/open", "/app/secret"} {
		ok(t, conn, &session.Request{Type: session.MsgCreate, Path: p})
	}
	w := watch(t, conn, &session.Request{Path: "/app", Kind: session.WatchRecursive})
	// "" keeps admin on / but may only write /app/secret, not read it:
	// its own most specific rule wins.
	ok(t, conn, &session.Request{Type: session.MsgACLSet, ACL: []namespace.ACLRule{{Identity: "", Prefix: "/app/secret", Perms: namespace.PermWrite}}})

	resp := ok(t, conn, &session.Request{Type: session.MsgChildren, Path: "/app"})
	if len(resp.Names) != 1 || resp.Names[0] != "open" {
		t.Fatalf("children of /app = %q, want only open", resp.Names)
	}
	fails(t, conn, &session.Request{Type: session.MsgGet, Path: "/app/secret"}, namespace.ErrPermissionDenied)
	fails(t, conn, &session.Request{Type: session.MsgExists, Path: "/app/secret"}, namespace.ErrPermissionDenied)
	fails(t, conn, &session.Request{Type: session.MsgDelete, Path: "/app/secret", Version: namespace.AnyVersion}, namespace.ErrPermissionDenied)
	fails(t, conn, &session.Request{Type: session.MsgWatch, Path: "/app/secret"}, namespace.ErrPermissionDenied)

	// A change of the unreadable node is not delivered on the recursive
	// watch; the next readable one is, first.
	ok(t, conn, &session.Request{Type: session.MsgSet, Path: "/app/secret", Data: []byte("s"), Version: namespace.AnyVersion})
	ok(t, conn, &session.Request{Type: session.MsgSet, Path: "/app/open", Data: []byte("o"), Version: namespace.AnyVersion})
	got := w.next(1)
	expectEvents(t, got, ev{namespace.EventDataChanged, "/app/open"})
}
