package server_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/latch-io/latch/server/proc"
)

// TestAPIStaleReadAnsweredLocally: ?stale=true reads of nodes, children
// and stat are answered by the member asked, from its own state: they
// still work on a follower whose cluster lost its quorum (a forwarded read
// would find no leader).
func TestAPIStaleReadAnsweredLocally(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := proc.StartCluster(t, 3)
	li := c.WaitLeader(t)
	fi := (li + 1) % 3
	f := c.Nodes[fi].APIAddr
	api := newAPIClient(t, c.Certs.CA)
	api.do(201, f, "POST", "/api/v1/nodes/st", map[string]any{"data": "v1"})
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, out, err := api.raw(f, "GET", "/api/v1/nodes/st?stale=true", nil)
		if err == nil && code == 200 && out.str("data") == "v1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the follower never served its copy: %d %v %v", code, out, err)
		}
		time.Sleep(20 * time.Millisecond) // polling the follower's apply, with a deadline
	}
	for i := range c.Nodes {
		if i != fi {
			c.Nodes[i].Kill(t)
		}
	}
	if g := api.do(200, f, "GET", "/api/v1/nodes/st?stale=true", nil); g.str("data") != "v1" {
		t.Fatalf("stale get on a follower without a leader: %v", g)
	}
	api.do(200, f, "GET", "/api/v1/stat/st?stale=true", nil)
	if ch := api.do(200, f, "GET", "/api/v1/children/?stale=true", nil).list("children"); fmt.Sprint(ch) == "[]" {
		t.Fatalf("stale children of / on a follower without a leader: %v", ch)
	}
}
