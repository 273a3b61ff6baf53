package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/latch-io/latch/server"
	"github.com/latch-io/latch/server/servertest"
)

// adminHTTP is an HTTPS client of c's admin endpoints presenting the
// certificate of identity ("" none); it keeps no connections.
func adminHTTP(c *servertest.Cluster, identity string) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: c.AdminTLS(identity), DisableKeepAlives: true}}
}

func httpGet(t *testing.T, c *servertest.Cluster, url string) (int, string) {
	t.Helper()
	resp, err := adminHTTP(c, servertest.AdminName).Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func httpPost(t *testing.T, c *servertest.Cluster, url string, body any) (int, string) {
	t.Helper()
	return httpPostAs(t, c, servertest.AdminName, url, body)
}

func httpPostAs(t *testing.T, c *servertest.Cluster, identity, url string, body any) (int, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := adminHTTP(c, identity).Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// metricValue scrapes s's /metrics and returns the sample named series
// (name plus labels exactly as exposed), or 0 when absent.
func metricValue(t *testing.T, c *servertest.Cluster, s *server.Server, series string) float64 {
	t.Helper()
	code, body := httpGet(t, c, "https://"+s.HTTPAddr()+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", line, err)
			}
			return v
		}
	}
	return 0
}

func TestAdminHTTP(t *testing.T) {
	c := servertest.StartCluster(t, 3, nil)
	leader := c.Server(c.WaitLeader())
	mustCommit(t, c, create("/h", "x"))
	for i := 0; i < 3; i++ {
		s := c.Server(i)
		base := "https://" + s.HTTPAddr()
		if code, body := httpGet(t, c, base+"/healthz"); code != http.StatusOK {
			t.Fatalf("n%d /healthz = %d %s", i+1, code, body)
		}
		servertest.Eventually(t, fmt.Sprintf("n%d ready", i+1), func() error {
			if code, body := httpGet(t, c, base+"/readyz"); code != http.StatusOK {
				return fmt.Errorf("%d %s", code, body)
			}
			return nil
		})
		code, body := httpGet(t, c, base+"/v1/status")
		var st server.Status
		if err := json.Unmarshal([]byte(body), &st); code != http.StatusOK || err != nil {
			t.Fatalf("/v1/status = %d %v: %s", code, err, body)
		}
		if st.ID != s.ID() || st.LeaderID != leader.ID() || st.AppliedIndex == 0 || len(st.Members) != 3 {
			t.Fatalf("n%d status = %+v", i+1, st)
		}
	}

	code, body := httpGet(t, c, "https://"+leader.HTTPAddr()+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d", code)
	}
	for _, want := range []string{
		"raft_commitTime", "raft_fsm_applyBatch", "raft_state_leader", "raft_state_follower",
		`latch_applied_index{member="` + leader.ID() + `"}`,
		`latch_proposals_total{member="` + leader.ID() + `",result="ok"}`,
		"latch_proposal_duration_seconds_bucket",
		"go_goroutines", "process_resident_memory_bytes",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if v := metricValue(t, c, leader, `latch_is_leader{member="`+leader.ID()+`"}`); v != 1 {
		t.Errorf("latch_is_leader on leader = %v", v)
	}

	code, body = httpPost(t, c, "https://"+leader.HTTPAddr()+"/v1/snapshot", struct{}{})
	if code != http.StatusOK || !strings.Contains(body, `"index"`) {
		t.Fatalf("/v1/snapshot = %d %s", code, body)
	}
	// Garbage is a 400 with a reason, never a crash.
	resp, err := adminHTTP(c, servertest.AdminName).Post("https://"+leader.HTTPAddr()+"/v1/join", "application/json", strings.NewReader("{nope"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("garbage join = %d", resp.StatusCode)
	}
	if code, body := httpPost(t, c, "https://"+leader.HTTPAddr()+"/v1/join", map[string]string{"id": "x", "raft_addr": "nope"}); code != http.StatusBadRequest {
		t.Fatalf("join with bad address = %d %s", code, body)
	}
	if code, body := httpPost(t, c, "https://"+leader.HTTPAddr()+"/v1/remove", map[string]string{"id": "ghost"}); code != http.StatusNotFound {
		t.Fatalf("remove of unknown member = %d %s", code, body)
	}
}

func TestJoinAndRemoveOverHTTP(t *testing.T) {
	c := servertest.StartCluster(t, 3, nil)
	leader := c.Server(c.WaitLeader())
	follower := c.Server((c.WaitLeader() + 1) % 3)
	mustCommit(t, c, create("/seed", "s"))
	// The follower must know the leader's admin address to redirect.
	servertest.Eventually(t, "follower knows leader metadata", func() error {
		var nl *server.NotLeaderError
		if _, err := follower.Propose(ctxT(t), create("/z", "")); !errors.As(err, &nl) || nl.LeaderHTTPAddr == "" {
			return fmt.Errorf("%v", err)
		}
		return nil
	})

	cfg := c.Config("n4", filepath.Join(t.TempDir(), "n4"))
	cfg.Join = "https://" + follower.HTTPAddr() // redirected to the leader
	cfg.ClientAddr = "127.0.0.1:0"              // resolved in New; the published address must be the bound one
	n4, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n4.Close()
	if err := n4.Start(); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "n4 joined with metadata", func() error {
		ms, err := leader.Members()
		if err != nil {
			return err
		}
		for _, m := range ms {
			if m.ID == "n4" && m.Suffrage == "voter" && m.RaftAddr == n4.RaftAddr() &&
				m.HTTPAddr == n4.HTTPAddr() && m.ClientAddr == n4.ClientAddr() {
				return nil
			}
		}
		return fmt.Errorf("members %+v", ms)
	})
	servertest.Eventually(t, "n4 has the data", func() error {
		_, _, err := n4.Store().Get("/seed")
		return err
	})
	mustCommit(t, c, create("/after-join", "j"))
	servertest.Eventually(t, "n4 follows new writes", func() error {
		_, _, err := n4.Store().Get("/after-join")
		return err
	})

	// Remove through a follower: it redirects to the leader.
	if code, body := httpPost(t, c, "https://"+follower.HTTPAddr()+"/v1/remove", map[string]string{"id": "n4"}); code != http.StatusOK {
		t.Fatalf("remove = %d %s", code, body)
	}
	ms, err := leader.Members()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 {
		t.Fatalf("after remove members = %+v", ms)
	}
	for _, m := range ms {
		if m.ID == "n4" {
			t.Fatalf("n4 still listed: %+v", ms)
		}
	}
	// The cluster keeps committing without n4, and n4 never re-adds itself.
	mustCommit(t, c, create("/after-remove", "r"))
	for i := 0; i < 3; i++ {
		waitData(t, c, i, "/after-remove", "r")
	}
	ms, _ = leader.Members()
	for _, m := range ms {
		if m.ID == "n4" {
			t.Fatalf("n4 re-added itself: %+v", ms)
		}
	}
}

// TestPprofIsAdminOnly: profiles are served to admins and refused to any
// other identity of the cluster CA, members included.
func TestPprofIsAdminOnly(t *testing.T) {
	c := servertest.StartCluster(t, 1, nil)
	s := c.Server(c.WaitLeader())
	url := "https://" + s.HTTPAddr() + "/debug/pprof/goroutine?debug=1"
	if code, body := httpGet(t, c, url); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Fatalf("admin GET %s = %d %.200s", url, code, body)
	}
	resp, err := adminHTTP(c, "mallory").Get(url)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "admin") {
		t.Fatalf("non-admin GET %s = %d %s, want 403", url, resp.StatusCode, b)
	}
}
