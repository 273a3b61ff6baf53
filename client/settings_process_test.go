package client

import (
	"bytes"
	"context"
	"encoding/json"
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

// TestMembersWithDifferentFlagsAgree starts three latchd processes whose
// lock-delay flags all differ, takes locks whose outcome those limits shape
// (a default lock-delay, a lock-delay above some members' cap), changes the
// settings through the admin API, and then compares the members' stores
// byte for byte: the settings are replicated, so state and tokens agree.
// Before settings were replicated each member recorded its own delays.
func TestMembersWithDifferentFlagsAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	flags := [][]string{
		{"--lock-delay", "1s", "--max-lock-delay", "2s"},
		{"--lock-delay", "3s", "--max-lock-delay", "10s"},
		{"--lock-delay", "7s", "--max-lock-delay", "20s"},
	}
	c := proc.StartClusterEach(t, 3, func(i int) []string { return flags[i] })
	leader := c.WaitLeader(t)
	cl := dialProcCluster(t, c, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), proc.WaitTimeout)
	defer cancel()

	s1, s2 := cl.Session(), newSession(t, cl)
	plain := NewMutex(s1, "/cfg/plain")
	capped := NewMutex(s1, "/cfg/capped", WithLockDelay(15*time.Second))
	for _, m := range []*Mutex{plain, capped} {
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A waiter granted by a release: its token comes from the release.
	waiter := NewMutex(s2, "/cfg/plain")
	granted := make(chan error, 1)
	go func() { granted <- waiter.Lock(ctx) }()
	waitQueue(t, cl, "/cfg/plain", "a waiter behind the holder", queueShape(true, false))
	if err := plain.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-granted; err != nil {
		t.Fatal(err)
	}

	// An operator change through a follower (redirected to the leader).
	follower := c.Nodes[(leader+1)%3]
	body := `{"limits": {"default_lock_delay_ms": 4000, "max_lock_delay_ms": 12000}}`
	var put struct {
		Revision uint64           `json:"revision"`
		Limits   namespace.Limits `json:"limits"`
	}
	if code := adminJSON(t, c, http.MethodPut, follower.HTTPAddr, "/v1/limits", body, &put); code != http.StatusOK {
		t.Fatalf("PUT /v1/limits: %d", code)
	}
	if put.Limits.DefaultLockDelayMillis != 4000 || put.Limits.MaxLockDelayMillis != 12000 || put.Revision == 0 {
		t.Fatalf("PUT /v1/limits answered %+v", put)
	}
	for _, m := range []*Mutex{NewMutex(s2, "/cfg/after", WithLockDelay(15*time.Second)), NewMutex(s2, "/cfg/after-default")} {
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A stale read-modify-write is refused.
	stale := fmt.Sprintf(`{"revision": %d, "limits": {"max_lock_batch": 10}}`, put.Revision-1)
	if code := adminJSON(t, c, http.MethodPut, c.Nodes[leader].HTTPAddr, "/v1/limits", stale, nil); code != http.StatusConflict {
		t.Fatalf("stale PUT /v1/limits: %d, want 409", code)
	}
	// Every member applied everything, then all are frozen and killed
	// (the sessions stay open: keepalives are not in the log, and a
	// graceful stop would make the others elect and commit more); their
	// stores must be identical (Dump prints the settings, every node and lock record with
	// its lock-delay and token).
	commit := waitSameApplied(t, c)
	dumps := make([]string, 3)
	for _, n := range c.Nodes {
		var got struct {
			Revision uint64           `json:"revision"`
			Limits   namespace.Limits `json:"limits"`
		}
		adminJSON(t, c, http.MethodGet, n.HTTPAddr, "/v1/limits", "", &got)
		if got.Revision != put.Revision || got.Limits != put.Limits {
			t.Errorf("%s: GET /v1/limits = %+v, want %+v", n.ID, got, put)
		}
	}
	for _, n := range c.Nodes {
		n.Pause(t)
	}
	for i, n := range c.Nodes {
		n.Kill(t)
		dumps[i] = dumpStore(t, filepath.Join(n.DataDir, "fsm"))
	}
	for i := 1; i < 3; i++ {
		if dumps[i] != dumps[0] {
			t.Fatalf("stores differ at applied index %d:\n%s:\n%s\n%s:\n%s", commit, c.Nodes[0].ID, dumps[0], c.Nodes[i].ID, dumps[i])
		}
	}
	for _, want := range []string{"delay=4000ms", "delay=12000ms"} {
		if !strings.Contains(dumps[0], want) {
			t.Errorf("dump lacks %q:\n%s", want, dumps[0])
		}
	}
	// Members whose flags differ from the settings in force say so.
	for _, n := range c.Nodes {
		if !strings.Contains(n.Logs(), "differ from the replicated cluster settings") {
			t.Errorf("%s did not log that its flags are ignored", n.ID)
		}
	}
}

func newSession(t *testing.T, cl *Client) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), proc.WaitTimeout)
	defer cancel()
	s, err := cl.NewSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitSameApplied waits until every member has registered its addresses
// and every member has applied the same index, and returns it.
func waitSameApplied(t *testing.T, c *proc.Cluster) uint64 {
	t.Helper()
	var applied uint64
	proc.Eventually(t, "members converge", func() error {
		var idx []uint64
		for _, n := range c.Nodes {
			st, err := n.Status()
			if err != nil {
				break
			}
			for _, m := range st.Members {
				if m.ClientAddr == "" {
					st.AppliedIndex = 0 // not registered yet
				}
			}
			if len(st.Members) != len(c.Nodes) {
				st.AppliedIndex = 0
			}
			idx = append(idx, st.AppliedIndex)
		}
		if len(idx) == len(c.Nodes) && idx[0] != 0 && idx[0] == idx[1] && idx[1] == idx[2] {
			applied = idx[0]
			return nil
		}
		return fmt.Errorf("applied %v", idx)
	})
	return applied
}

// dumpStore opens a stopped member's namespace store and dumps it.
func dumpStore(t *testing.T, dir string) string {
	t.Helper()
	s, err := store.Open(store.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var b bytes.Buffer
	if err := s.Dump(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// adminJSON sends a request to a member's admin API, decodes the answer
// into out (when not nil) and returns the status code.
func adminJSON(t *testing.T, c *proc.Cluster, method, addr, path, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, "https://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	conf, err := proc.AdminTLS(c.Certs)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: conf, DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}
