package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/namespace/store"
	"github.com/latch-io/latch/server/proc"
)

// TestStateHashCheckFindsDivergence gives a follower a real divergence
// that no checksum can see: while it is stopped, its store applies a
// write the cluster never made (at the next index, so it also skips the
// real entry there). After a hash check through the log, the follower
// finds a majority against it and stops (exit status 1, one log line),
// and the leader raises the alarm naming it and the index.
func TestStateHashCheckFindsDivergence(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := proc.StartCluster(t, 3, "--hash-check-interval=-1s")
	leader := c.WaitLeader(t)
	cl := dialProcCluster(t, c, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), proc.WaitTimeout)
	defer cancel()
	if _, err := cl.Create(ctx, "/x", []byte("good")); err != nil {
		t.Fatal(err)
	}
	waitSameApplied(t, c)

	// A check with nothing wrong: every member agrees, nobody fails.
	var ok struct {
		Index uint64 `json:"index"`
	}
	if code := adminJSON(t, c, http.MethodPost, c.Nodes[leader].HTTPAddr, "/v1/hash-check", "", &ok); code != http.StatusOK {
		t.Fatalf("POST /v1/hash-check: %d", code)
	}
	waitMetric(t, c.Nodes[leader], `latch_state_hash_checks_total{member="`+c.Nodes[leader].ID+`",result="match"} 2`)

	f := c.Nodes[(leader+1)%3]
	if code := f.Stop(t); code != 0 {
		t.Fatalf("%s exited %d", f.ID, code)
	}
	st, err := store.Open(store.Config{Dir: filepath.Join(f.DataDir, "fsm")})
	if err != nil {
		t.Fatal(err)
	}
	if r := st.Apply(st.AppliedIndex()+1, 0, &namespace.Command{Op: namespace.OpSet, Path: "/x", Data: []byte("evil"), Version: namespace.AnyVersion}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	f.Start(t)
	f.WaitHealthy(t)
	// The cluster's next command lands on the index the follower already
	// used, so the follower skips it: it diverges further. The hash check
	// then comes at an index every member applies.
	if _, err := cl.Create(ctx, "/y", nil); err != nil {
		t.Fatal(err)
	}

	if code := adminJSON(t, c, http.MethodPost, c.Nodes[leader].HTTPAddr, "/v1/hash-check", "", &ok); code != http.StatusOK {
		t.Fatalf("POST /v1/hash-check: %d", code)
	}
	code, err := f.WaitExit(proc.WaitTimeout)
	if err != nil || code != 1 {
		t.Fatalf("the diverged follower: exit %d, %v; want exit status 1", code, err)
	}
	if logs := f.Logs(); !strings.Contains(logs, "this member stops serving") || !strings.Contains(logs, fmt.Sprintf("state hash at index %d", ok.Index)) {
		t.Fatalf("the diverged follower did not say why; log tail:\n%s", tail(logs, 10))
	}
	want := fmt.Sprintf(`latch_state_hash_mismatch{member="%s"} 1`, c.Nodes[leader].ID)
	waitMetric(t, c.Nodes[leader], want)
	if logs := c.Nodes[leader].Logs(); !strings.Contains(logs, fmt.Sprintf("peer=%s index=%d", f.ID, ok.Index)) {
		t.Fatalf("the leader's alarm does not name %s and index %d; log tail:\n%s", f.ID, ok.Index, tail(logs, 10))
	}
	// The healthy majority still serves the real data.
	if data, _, err := cl.Get(ctx, "/x"); err != nil || string(data) != "good" {
		t.Fatalf("Get /x: %q %v", data, err)
	}
}

// waitMetric waits until the member's /metrics shows line.
func waitMetric(t *testing.T, n *proc.Node, line string) {
	t.Helper()
	proc.Eventually(t, n.ID+" /metrics shows "+line, func() error {
		code, body, err := n.Get("/metrics")
		switch {
		case err != nil:
			return err
		case code != http.StatusOK:
			return fmt.Errorf("/metrics: %d", code)
		case !strings.Contains(body, line):
			return errors.New("not shown")
		}
		return nil
	})
}
