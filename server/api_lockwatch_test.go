package server_test

import (
	"testing"
	"time"

	"github.com/latch-io/latch/server"
)

// TestAPIWatchLockEvents: an SSE watch with kind=locks gets the lock
// events of the path's requests: the grant with its token and holder,
// the conflicting request (at the revision that queued it, naming the
// waiter), the end with its cause, then the next grant; in revision
// order, one message per revision. A watch without locks gets none.
func TestAPIWatchLockEvents(t *testing.T) {
	fc := startFront(t, 1, func(i int, cfg *server.Config) { cfg.APIAddr = "127.0.0.1:0" })
	fc.WaitLeader()
	addr := fc.Server(0).APIAddr()
	api := newAPIClient(t, fc.Certs().CA)

	locks, err := api.sse(addr, "/api/v1/watch/jobs?kind=locks", "")
	if err != nil {
		t.Fatal(err)
	}
	defer locks.close()
	nodes, err := api.sse(addr, "/api/v1/watch/jobs?kind=children", "")
	if err != nil {
		t.Fatal(err)
	}
	defer nodes.close()
	locks.next(t, 10*time.Second, "ready")
	nodes.next(t, 10*time.Second, "ready")

	a1 := api.do(200, addr, "POST", "/api/v1/locks/jobs/acquire", map[string]any{"client_id": "w1", "ttl_ms": 20000})
	waited := make(chan apiReply, 1)
	go func() {
		_, out, _ := api.raw(addr, "POST", "/api/v1/locks/jobs/acquire", map[string]any{"client_id": "w2", "ttl_ms": 20000, "wait_timeout_ms": 20000})
		waited <- out
	}()
	waitQueueLen(t, api, addr, "/jobs", 2)
	q := api.do(200, addr, "GET", "/api/v1/locks/jobs/queue", nil).list("queue")
	api.do(200, addr, "POST", "/api/v1/locks/jobs/release", map[string]any{"fencing_token": a1.num("fencing_token"), "lease_token": a1.str("lease_token")})
	var a2 apiReply
	select {
	case a2 = <-waited:
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting acquire was not granted")
	}
	if a2["acquired"] != true {
		t.Fatalf("second acquire: %v", a2)
	}

	// The events, flattened, with the revision of their message.
	type lockEv struct {
		rev uint64
		ev  map[string]any
	}
	var got []lockEv
	var last uint64
	for len(got) < 4 {
		msg := locks.next(t, 10*time.Second, "change")
		rev := msg.Data.num("revision")
		if rev <= last {
			t.Fatalf("message at revision %d after %d", rev, last)
		}
		last = rev
		for _, e := range msg.Data.list("events") {
			got = append(got, lockEv{rev, e.(map[string]any)})
		}
	}
	first, second := q[0].(map[string]any), q[1].(map[string]any)
	str := func(e map[string]any, k string) string { s, _ := e[k].(string); return s }
	num := func(e map[string]any, k string) uint64 { f, _ := e[k].(float64); return uint64(f) }
	check := func(i int, typ, node string) map[string]any {
		t.Helper()
		e := got[i].ev
		if str(e, "type") != typ || str(e, "path") != node || str(e, "mode") != "exclusive" {
			t.Fatalf("event %d: %v, want %s of %s", i, e, typ, node)
		}
		return e
	}
	g1 := check(0, "lock-granted", str(first, "node"))
	if num(g1, "token") != a1.num("fencing_token") || num(g1, "session_id") != a1.num("session_id") {
		t.Fatalf("grant %v, acquire answered %v", g1, a1)
	}
	c := check(1, "lock-contended", str(first, "node"))
	if str(c, "waiter") != str(second, "node") || num(c, "waiter_session_id") != a2.num("session_id") ||
		got[1].rev != num(second, "revision") {
		t.Fatalf("contended %v at revision %d; the waiter is %v", c, got[1].rev, second)
	}
	end := check(2, "lock-released", str(first, "node"))
	if cause := str(end, "cause"); cause != "released" && cause != "session-closed" {
		t.Fatalf("end %v: cause %q", end, cause)
	}
	g2 := check(3, "lock-granted", str(second, "node"))
	if num(g2, "token") != a2.num("fencing_token") || got[3].rev != num(g2, "token") {
		t.Fatalf("second grant %v at revision %d, acquire answered %v", g2, got[3].rev, a2)
	}
	// The children watch saw the request nodes come and go, and no lock
	// event.
	for i := 0; i < 2; i++ {
		for _, e := range nodes.next(t, 10*time.Second, "change").Data.list("events") {
			if typ := e.(map[string]any)["type"]; typ != "children-changed" {
				t.Fatalf("children watch got %v", e)
			}
		}
	}
	api.do(200, addr, "POST", "/api/v1/locks/jobs/release", map[string]any{"fencing_token": a2.num("fencing_token"), "lease_token": a2.str("lease_token")})
	if code, e, _ := api.raw(addr, "GET", "/api/v1/watch/jobs?kind=lock", nil); code != 400 {
		t.Fatalf("unknown kind: %d %v", code, e)
	}
}
