package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/server/proc"
)

// TestStalledLeaderIsReplaced: the leader's disk stops answering (fault
// injection holds every raft log write of the member, as a hung device
// would). Before, its heartbeats went on from other goroutines, so no one
// was elected and every write waited for ever. Now, after
// --storage-stall-timeout, it fails and exits 1 saying why; the others
// elect a leader, writes succeed through it, and every acknowledged write
// is there.
func TestStalledLeaderIsReplaced(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := proc.StartCluster(t, 3, "--fault-injection", "--storage-stall-timeout", "1s")
	leader := c.WaitLeader(t)
	cl := dialProcCluster(t, c, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*proc.WaitTimeout)
	defer cancel()
	mkdir(t, cl, "/d")
	var acked []string
	for i := range 20 {
		p := fmt.Sprintf("/d/n%02d", i)
		if _, err := cl.Create(ctx, p, []byte(p)); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, p)
	}

	stuck := c.Nodes[leader]
	ac, err := stuck.Admin()
	if err != nil {
		t.Fatal(err)
	}
	if err := ac.Do(ctx, http.MethodPost, stuck.HTTPAddr, "/v1/faults/storage", map[string]bool{"stall": true}, nil); err != nil {
		t.Fatal(err)
	}
	// A write: the stuck leader cannot append it; it commits once another
	// member leads (the client retries; a retry that finds the node made
	// by its first try counts too).
	for {
		_, err := cl.Create(ctx, "/after", []byte("x"))
		if err == nil || errors.Is(err, ErrNodeExists) {
			break
		}
		if !errors.Is(err, ErrUnknownOutcome) {
			t.Fatalf("write while the leader's disk is stuck: %v", err)
		}
	}
	code, err := stuck.WaitExit(proc.WaitTimeout)
	if err != nil {
		t.Fatalf("the stuck leader kept running: %v", err)
	}
	if code != 1 {
		t.Fatalf("the stuck leader exited %d, want 1", code)
	}
	if logs := stuck.Logs(); !strings.Contains(logs, "storage stopped answering") {
		t.Fatalf("the stuck leader does not say why; log tail:\n%s", tail(logs, 10))
	}
	if next := c.WaitLeader(t); next == leader {
		t.Fatal("the stuck member still leads")
	}
	for _, p := range append(acked, "/after") {
		if _, _, err := cl.Get(ctx, p); err != nil {
			t.Fatalf("acknowledged %s: %v", p, err)
		}
	}
}
