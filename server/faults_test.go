package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server"
	"github.com/latch-io/latch/server/servertest"
)

func TestFaultsEndpointOffByDefault(t *testing.T) {
	c := servertest.StartCluster(t, 1, nil)
	c.WaitLeader()
	code, _ := httpPost(t, c, "https://"+c.Server(0).HTTPAddr()+"/v1/faults", map[string]any{"block": []string{}})
	if code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
		t.Fatalf("POST /v1/faults without FaultInjection: %d, want 404/405", code)
	}
}

// block tells member i to cut raft traffic to the given members.
func block(t *testing.T, c *servertest.Cluster, i int, to ...int) {
	t.Helper()
	addrs := []string{}
	for _, j := range to {
		addrs = append(addrs, c.Server(j).RaftAddr())
	}
	code, body := httpPost(t, c, "https://"+c.Server(i).HTTPAddr()+"/v1/faults", map[string]any{"block": addrs})
	if code != http.StatusOK {
		t.Fatalf("POST /v1/faults on n%d: %d %s", i+1, code, body)
	}
	var got struct{ Block []string }
	if err := json.Unmarshal([]byte(body), &got); err != nil || len(got.Block) != len(addrs) {
		t.Fatalf("POST /v1/faults answered %s (%v), want %d blocked", body, err, len(addrs))
	}
}

// An isolated leader loses leadership, the majority elects another and
// commits without it, and after healing the old leader catches up.
func TestFaultsIsolateLeader(t *testing.T) {
	c := servertest.StartCluster(t, 3, &servertest.Options{Configure: func(i int, cfg *server.Config) {
		cfg.FaultInjection = true
	}})
	old := c.WaitLeader()
	var others []int
	for i := 0; i < 3; i++ {
		if i != old {
			others = append(others, i)
		}
	}

	if code, body := httpPost(t, c, "https://"+c.Server(old).HTTPAddr()+"/v1/faults", map[string]any{"block": []string{"no-port"}}); code != http.StatusBadRequest {
		t.Fatalf("bad address: %d %s, want 400", code, body)
	}

	block(t, c, old, others...)
	for _, i := range others {
		block(t, c, i, old)
	}
	newLeader := -1
	servertest.Eventually(t, "majority elects a leader", func() error {
		for _, i := range others {
			if c.Server(i).IsLeader() {
				newLeader = i
				return nil
			}
		}
		return fmt.Errorf("none of n%d, n%d is leader", others[0]+1, others[1]+1)
	})
	servertest.Eventually(t, "isolated leader steps down", func() error {
		if c.Server(old).IsLeader() {
			return fmt.Errorf("n%d still leader", old+1)
		}
		return nil
	})
	res, err := c.Server(newLeader).Propose(context.Background(), &namespace.Command{Op: namespace.OpCreate, Path: "/during-partition"})
	if err != nil || res.Err != nil {
		t.Fatalf("propose in the majority: %v %v", err, res)
	}
	if _, _, err := c.Server(old).Store().Get("/during-partition"); err == nil {
		t.Fatal("isolated member applied a write of the majority's term")
	}

	code, body := httpGet(t, c, "https://"+c.Server(old).HTTPAddr()+"/v1/faults")
	if code != http.StatusOK || !json.Valid([]byte(body)) {
		t.Fatalf("GET /v1/faults: %d %s", code, body)
	}
	for i := 0; i < 3; i++ {
		block(t, c, i)
	}
	c.WaitApplied(res.Index)
	if _, _, err := c.Server(old).Store().Get("/during-partition"); err != nil {
		t.Fatalf("healed member lacks the majority's write: %v", err)
	}
}
