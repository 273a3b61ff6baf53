package server_test

import (
	"testing"
	"time"

	"github.com/latch-io/latch/server/proc"
)

// Against three real members: a lock whose last path component is
// "queue" or "history" is named unambiguously with ?view=, the old
// spellings keep their meaning, and an implicit-lease waiter whose ttl_ms
// is shorter than its wait keeps its place in the queue until granted.
func TestAPILockViewsAndImplicitWaiter(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := proc.StartCluster(t, 3)
	li := c.WaitLeader(t)
	f := c.Nodes[(li+1)%3].APIAddr // a follower: it forwards to the leader
	api := newAPIClient(t, c.Certs.CA)

	for _, p := range []string{"x", "x/queue", "x/history", "w"} {
		api.do(201, f, "POST", "/api/v1/nodes/"+p, nil)
	}
	acquire := func(path, client string, ttl, wait int) apiReply {
		return api.do(200, f, "POST", "/api/v1/locks/"+path+"/acquire",
			map[string]any{"client_id": client, "ttl_ms": ttl, "wait_timeout_ms": wait})
	}
	for _, p := range []string{"x/queue", "x/history"} {
		if g := acquire(p, "holder-"+p, 15000, 5000); g["acquired"] != true {
			t.Fatalf("acquire %s: %v", p, g)
		}
	}
	queue := func(url string) (string, int) {
		q := api.do(200, f, "GET", url, nil)
		return q.str("path"), len(q.list("queue"))
	}
	for url, want := range map[string]struct {
		path string
		n    int
	}{
		"/api/v1/locks/x/queue?view=queue":   {"/x/queue", 1},
		"/api/v1/locks/x/history?view=queue": {"/x/history", 1},
		"/api/v1/locks/x/queue/queue":        {"/x/queue", 1},
		"/api/v1/locks/x/queue":              {"/x", 0}, // the old reading: /x's queue
		"/api/v1/locks/x":                    {"/x", 0},
	} {
		if p, n := queue(url); p != want.path || n != want.n {
			t.Errorf("GET %s: queue of %s with %d requests, want %s with %d", url, p, n, want.path, want.n)
		}
	}
	h := api.do(200, f, "GET", "/api/v1/locks/x/history?view=history", nil)
	if h.str("path") != "/x/history" || len(h.list("history")) == 0 {
		t.Errorf("history view of /x/history: %v", h)
	}
	for _, ev := range h.list("history") {
		if p := ev.(map[string]any)["path"]; p != "/x/history" {
			t.Errorf("history of /x/history holds a record of %v", p)
		}
	}
	if e := api.do(400, f, "GET", "/api/v1/locks/x?view=holders", nil); e.str("name") != "BadCommand" {
		t.Errorf("unknown view: %v", e)
	}

	// The waiter: ttl_ms 1500, wait 20 s, behind a holder of /w.
	held := acquire("w", "holder", 15000, 5000)
	type answer struct {
		code int
		body apiReply
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		code, body, err := api.raw(f, "POST", "/api/v1/locks/w/acquire",
			map[string]any{"client_id": "waiter", "ttl_ms": 1500, "wait_timeout_ms": 20000})
		got <- answer{code, body, err}
	}()
	// It must stay queued for well over its TTL: its session would have
	// expired (and its node gone) three times over without renewals.
	stayed := time.Now().Add(4500 * time.Millisecond)
	for time.Now().Before(stayed) {
		select {
		case a := <-got:
			t.Fatalf("the waiter answered while the lock was held: %d %v %v", a.code, a.body, a.err)
		case <-time.After(100 * time.Millisecond): // polling the queue with a deadline
		}
		if _, n := queue("/api/v1/locks/w?view=queue"); n != 2 && time.Until(stayed) < 4*time.Second {
			t.Fatalf("the queue of /w has %d requests while the waiter waits, want 2", n)
		}
	}
	api.do(200, f, "POST", "/api/v1/locks/w/release",
		map[string]any{"lease_token": held.str("lease_token"), "fencing_token": held.num("fencing_token")})
	a := <-got
	if a.err != nil || a.code != 200 || a.body["acquired"] != true || a.body.num("fencing_token") <= held.num("fencing_token") {
		t.Fatalf("the waiter after the release: %d %v %v", a.code, a.body, a.err)
	}
}
