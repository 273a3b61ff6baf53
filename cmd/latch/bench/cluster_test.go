package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// TestScenariosOnRealCluster runs every scenario briefly against three
// latchd processes (fsync on, real QUIC and TLS) and checks that each
// report is complete and plausible, and that a run leaves no node and no
// session behind. It asserts no timings.
func TestScenariosOnRealCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts latchd processes")
	}
	cl := proc.StartCluster(t, 3)
	leader := cl.WaitLeader(t)
	leaderID := cl.Nodes[leader].ID
	tlsConf, err := session.ClientTLS(cl.Certs.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	ccfg := client.Config{Endpoints: cl.ClientAddrs(), TLS: tlsConf, SessionTTL: 3 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	check, err := client.Dial(ctx, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	baseSessions := countSessions(t, check)

	run := func(t *testing.T, cfg Config) *Report {
		t.Helper()
		cfg.Client = ccfg
		if cfg.Prefix == "" {
			cfg.Prefix = "/bench-" + strings.NewReplacer("/", "-", " ", "-", ",", "").Replace(t.Name())
		}
		rep, err := Run(ctx, cfg)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if rep.Scenario != cfg.Scenario || rep.Ops <= 0 || rep.Elapsed <= 0 || rep.OpsPerSec <= 0 || rep.Conns <= 0 || rep.Concurrency <= 0 {
			t.Errorf("incomplete report: %+v", rep)
		}
		for _, l := range rep.Latency {
			if l.Count <= 0 || l.P50 <= 0 || l.P50 > l.P90 || l.P90 > l.P99 || l.P99 > l.Max {
				t.Errorf("latency %s not ordered or empty: %+v", l.Op, l.Latency)
			}
		}
		if rep.Truncated {
			t.Errorf("truncated: %+v", rep)
		}
		b, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		var back map[string]any
		if err := json.Unmarshal(b, &back); err != nil || back["scenario"] != cfg.Scenario {
			t.Errorf("JSON %s does not decode: %v", b, err)
		}
		if txt := rep.Text(); !strings.Contains(txt, "scenario") || !strings.Contains(txt, cfg.Scenario) {
			t.Errorf("table:\n%s", txt)
		}
		if !cfg.Keep {
			if ok, _, err := check.Exists(ctx, cfg.Prefix); err != nil || ok {
				t.Errorf("%s left behind (exists %v, %v)", cfg.Prefix, ok, err)
			}
		}
		if n := countSessions(t, check); n != baseSessions {
			t.Errorf("%d sessions after the run, %d before", n, baseSessions)
		}
		return rep
	}
	opsOf := func(rep *Report, op string) Latency {
		for _, l := range rep.Latency {
			if l.Op == op {
				return l.Latency
			}
		}
		t.Errorf("no %s latency in %+v", op, rep.Latency)
		return Latency{}
	}

	t.Run("get", func(t *testing.T) {
		rep := run(t, Config{Scenario: ScenarioGet, Ops: 50, Concurrency: 2, Conns: 2})
		if rep.Ops != 50 || opsOf(rep, "get").Count != 50 {
			t.Errorf("ops %d, latencies %+v; want 50", rep.Ops, rep.Latency)
		}
	})
	t.Run("stale-get", func(t *testing.T) {
		rep := run(t, Config{Scenario: ScenarioStaleGet, Ops: 50})
		if rep.Ops != 50 || opsOf(rep, "stale-get").Count != 50 {
			t.Errorf("ops %d; want 50", rep.Ops)
		}
	})
	t.Run("stale-get spread", func(t *testing.T) {
		rep := run(t, Config{Scenario: ScenarioStaleGet, Ops: 60, Concurrency: 3, Conns: 3, ReadFrom: ReadSpread, LeaderCPU: true})
		total := 0
		for _, n := range rep.ReadMembers {
			total += n
		}
		if total != 3 || len(rep.ReadMembers) < 2 {
			t.Errorf("3 connections spread over 3 members read from %v", rep.ReadMembers)
		}
		if rep.LeaderCPUMillisPerOp == nil {
			t.Logf("leader CPU not measured (a leader change?)")
		} else if *rep.LeaderCPUMillisPerOp < 0 { // 0 on a short run: the kernel counts CPU in ticks
			t.Errorf("leader CPU %v ms per read", *rep.LeaderCPUMillisPerOp)
		}
		rep = run(t, Config{Scenario: ScenarioStaleGet, Ops: 30, Concurrency: 2, Conns: 2, ReadFrom: ReadLeader})
		if rep.ReadMembers[""] != 2 {
			t.Errorf("--read-from leader: connections read from %v, want the leader only", rep.ReadMembers)
		}
	})
	// With MemberCPU the members' own counters say who answered: with
	// followers, the leader none (but for a read a busy follower refused
	// as behind, which the client then asks the leader).
	t.Run("stale-get followers member-cpu", func(t *testing.T) {
		const ops = 80
		waitAddresses(t, check, 3)
		rep := run(t, Config{Scenario: ScenarioStaleGet, Ops: ops, Concurrency: 4, Conns: 4, ReadFrom: ReadFollowers, MemberCPU: true})
		roles, byFollowers, byLeader := map[string]int{}, 0, 0
		for _, m := range rep.Members {
			roles[m.Role]++
			if m.Reads < 0 || m.CPUPercent < 0 || (m.BudgetPercent > 0) != (m.ThrottledPercent != nil) {
				t.Errorf("member %+v", m)
			}
			switch m.Role {
			case roleLeader:
				byLeader += m.Reads
			case roleFollower:
				byFollowers += m.Reads
			}
		}
		if len(rep.Members) != 3 || roles[roleLeader] != 1 || roles[roleFollower] != 2 {
			t.Fatalf("members %+v: want a leader and two followers", rep.Members)
		}
		if byFollowers+byLeader < ops || byFollowers == 0 {
			t.Errorf("followers answered %d reads, the leader %d, of %d: want the followers some, and all counted", byFollowers, byLeader, ops)
		}
		if _, ok := rep.ReadMembers[leaderID]; ok {
			t.Errorf("a connection read from the leader %s: %v", leaderID, rep.ReadMembers)
		}
	})
	t.Run("cached-get", func(t *testing.T) {
		rep := run(t, Config{Scenario: ScenarioCachedGet, Ops: 200, Concurrency: 2, Conns: 2})
		if rep.Ops != 200 || opsOf(rep, "cached-get").Count != 200 {
			t.Errorf("ops %d; want 200", rep.Ops)
		}
	})
	t.Run("cached-set", func(t *testing.T) {
		rep := run(t, Config{Scenario: ScenarioCachedSet, Ops: 20, Cachers: 8})
		if rep.Ops != 20 || opsOf(rep, "set").Count != 20 {
			t.Errorf("ops %d; want 20", rep.Ops)
		}
	})
	t.Run("create-keep", func(t *testing.T) {
		rep := run(t, Config{Scenario: ScenarioCreate, Ops: 50, Concurrency: 4, Keep: true, Prefix: "/bench-kept"})
		if rep.Ops != 50 || opsOf(rep, "create").Count != 50 {
			t.Errorf("ops %d; want 50", rep.Ops)
		}
		kids, err := check.Children(ctx, "/bench-kept/create")
		if err != nil || len(kids) != 50 {
			t.Fatalf("%d nodes created (%v), want 50", len(kids), err)
		}
		data, _, err := check.Get(ctx, "/bench-kept/create/"+kids[0])
		if err != nil || len(data) != DefaultDataSize {
			t.Errorf("node holds %d bytes (%v), want %d", len(data), err, DefaultDataSize)
		}
		if err := check.Delete(ctx, "/bench-kept", client.Recursive()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("create", func(t *testing.T) {
		run(t, Config{Scenario: ScenarioCreate, Ops: 300}) // clean-up needs three Multis
	})
	t.Run("lock", func(t *testing.T) {
		rep := run(t, Config{Scenario: ScenarioLock, Ops: 50, Concurrency: 2})
		if opsOf(rep, "acquire").Count != 50 || opsOf(rep, "release").Count != 50 {
			t.Errorf("latencies %+v; want 50 acquires and releases", rep.Latency)
		}
	})
	t.Run("lock-fresh-path", func(t *testing.T) {
		run(t, Config{Scenario: ScenarioLock, Ops: 20, FreshPath: true})
	})
	t.Run("contended", func(t *testing.T) {
		rep := run(t, Config{Scenario: ScenarioContended, Concurrency: 8, Locks: 2, Conns: 2, Duration: time.Second, LeaderCPU: true, Reference: 1000})
		c := rep.Contention
		if c == nil || c.Clients != 8 || c.Locks != 2 || c.MinGrants <= 0 || c.MaxGrants < c.MinGrants || c.Fairness == nil || *c.Fairness < 1 {
			t.Fatalf("contention %+v", c)
		}
		// Elections are counted by term (a leader change in the middle
		// is a figure, not a failure); the goodput is against the
		// reference given.
		if c.Elections == nil || *c.Elections < 0 {
			t.Errorf("elections %v, want a count", c.Elections)
		}
		if c.GoodputPercent == nil || math.Abs(*c.GoodputPercent-rep.OpsPerSec/10) > 1e-9*rep.OpsPerSec {
			t.Errorf("goodput %v%%, want %v%% of a reference of 1000/s", c.GoodputPercent, rep.OpsPerSec/10)
		}
		if opsOf(rep, "acquire").Count != rep.Ops || rep.Ops < 8 {
			t.Errorf("%d cycles, %d acquires", rep.Ops, opsOf(rep, "acquire").Count)
		}
	})
	t.Run("contended-random", func(t *testing.T) {
		rep := run(t, Config{Scenario: ScenarioContended, Concurrency: 8, Locks: 3, Conns: 8, Duration: time.Second, RandomLock: true})
		if c := rep.Contention; c == nil || !c.RandomLock || c.MinGrants <= 0 {
			t.Fatalf("contention %+v", c)
		}
	})
	t.Run("set", func(t *testing.T) {
		rep := run(t, Config{Scenario: ScenarioSet, Ops: 60, Concurrency: 3, LeaderCPU: true})
		if opsOf(rep, "set").Count != 60 {
			t.Errorf("latencies %+v; want 60 sets", rep.Latency)
		}
		// Missing only when the leader changed meanwhile (the figure
		// would mix two processes); it may round to 0 on a short run.
		cpu := rep.LeaderCPUMillisPerOp
		if cpu == nil && cl.Nodes[cl.WaitLeader(t)].ID == leaderID || cpu != nil && *cpu < 0 {
			t.Errorf("leader CPU per set %v, want a figure", cpu)
		}
	})
	t.Run("watch", func(t *testing.T) {
		rep := run(t, Config{Scenario: ScenarioWatch, Ops: 40})
		if opsOf(rep, "set").Count != 40 || opsOf(rep, "put→event").Count != 40 {
			t.Fatalf("latencies %+v; want 40 sets and events", rep.Latency)
		}
	})
	checkSessions := func(t *testing.T, rep *Report, n int) {
		s := rep.Sessions
		if s == nil || rep.Ops != n || s.Sessions != n || s.Lost != 0 || s.OpenRate <= 0 || s.CloseRate <= 0 {
			t.Fatalf("report %+v, sessions %+v", rep, s)
		}
		if s.Leader != leaderID || s.LeaderAdmin != cl.Nodes[leader].HTTPAddr {
			t.Errorf("measured %s at %s, leader is %s at %s", s.Leader, s.LeaderAdmin, leaderID, cl.Nodes[leader].HTTPAddr)
		}
		if s.LeaderCPUPercent <= 0 || s.RSSBefore <= 0 || s.RSSHeld <= 0 || s.Window <= 0 || s.TTL != Millis(3*time.Second) {
			t.Errorf("sessions %+v", s)
		}
		if s.GoroutinesBefore <= 0 || s.GoroutinesHeld <= s.GoroutinesBefore || s.GoroutinesPerConn <= 0 {
			t.Errorf("goroutines %d before, %d held, %.2f per connection: want more held", s.GoroutinesBefore, s.GoroutinesHeld, s.GoroutinesPerConn)
		}
		if opsOf(rep, "open").Count != n {
			t.Errorf("open latencies %+v", rep.Latency)
		}
	}
	t.Run("sessions-one-connection", func(t *testing.T) {
		rep := run(t, Config{Scenario: ScenarioSessions, Sessions: 200, Window: 2 * time.Second})
		checkSessions(t, rep, 200)
	})
	t.Run("sessions-connection-each", func(t *testing.T) {
		rep := run(t, Config{Scenario: ScenarioSessions, Sessions: 30, Conns: 30, Window: time.Second})
		checkSessions(t, rep, 30)
	})
	t.Run("sessions-admin-not-leader", func(t *testing.T) {
		follower := cl.Nodes[(leader+1)%3]
		_, err := Run(ctx, Config{Scenario: ScenarioSessions, Client: ccfg, Sessions: 5, Admin: follower.HTTPAddr})
		if !errors.Is(err, ErrAdminNotLeader) {
			t.Errorf("admin of a follower: %v, want ErrAdminNotLeader", err)
		}
	})
	t.Run("max-time-truncates", func(t *testing.T) {
		start := time.Now()
		rep, err := Run(ctx, Config{Scenario: ScenarioContended, Client: ccfg, Concurrency: 4, Duration: time.Minute,
			MaxTime: 500 * time.Millisecond, Prefix: "/bench-truncated"})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Truncated || time.Since(start) > 20*time.Second {
			t.Errorf("truncated %v after %v", rep.Truncated, time.Since(start))
		}
		if ok, _, err := check.Exists(ctx, "/bench-truncated"); err != nil || ok {
			t.Errorf("truncated run left its prefix (%v, %v)", ok, err)
		}
	})
	// Last: the learner stays in the configuration.
	t.Run("stale-get learners", func(t *testing.T) {
		if _, err := Run(ctx, Config{Scenario: ScenarioStaleGet, Client: ccfg, Ops: 1, ReadFrom: ReadLearners, Prefix: "/bench-no-learner"}); !errors.Is(err, ErrBadConfig) {
			t.Errorf("learners without one: %v, want ErrBadConfig", err)
		}
		learner := addLearner(t, cl, cl.WaitLeader(t))
		waitAddresses(t, check, 4)
		const ops = 60
		rep := run(t, Config{Scenario: ScenarioStaleGet, Ops: ops, Concurrency: 3, Conns: 3, ReadFrom: ReadLearners, MemberCPU: true})
		if rep.ReadMembers[learner.ID] != 3 {
			t.Errorf("connections read from %v, want all 3 from the learner %s", rep.ReadMembers, learner.ID)
		}
		// A read the new learner refused as behind goes to the leader,
		// never to a follower.
		var got *MemberLoad
		for i, m := range rep.Members {
			switch {
			case m.ID == learner.ID:
				got = &rep.Members[i]
			case m.Role == roleFollower && m.Reads != 0:
				t.Errorf("follower %s answered %d reads with --read-from learners", m.ID, m.Reads)
			}
		}
		if got == nil || got.Role != roleLearner || got.Reads == 0 {
			t.Errorf("learner %s's load %+v of %d reads: want it measured, a learner, answering", learner.ID, got, ops)
		}
	})
	t.Run("prefix-exists", func(t *testing.T) {
		if _, err := check.Create(ctx, "/bench-taken", nil); err != nil {
			t.Fatal(err)
		}
		_, err := Run(ctx, Config{Scenario: ScenarioGet, Client: ccfg, Ops: 1, Prefix: "/bench-taken"})
		if !errors.Is(err, client.ErrNodeExists) {
			t.Errorf("existing prefix: %v, want ErrNodeExists", err)
		}
		if ok, _, _ := check.Exists(ctx, "/bench-taken"); !ok {
			t.Error("a run deleted a prefix it did not create")
		}
	})
}

func countSessions(t *testing.T, c *client.Client) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := c.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// addLearner adds a learner to cl: put into the configuration through the
// leader's admin API, then started with --join; it returns once the
// learner is healthy (the bench's Sync makes its reads wait for its log).
func addLearner(t *testing.T, cl *proc.Cluster, leader int) *proc.Node {
	t.Helper()
	id := fmt.Sprintf("n%d", len(cl.Nodes)+1)
	args, err := proc.MemberArgs(cl.Certs, id)
	if err != nil {
		t.Fatal(err)
	}
	nd := proc.NewNode(t, proc.Options{ID: id, Args: append([]string{"--join", cl.Nodes[leader].HTTPAddr}, args...)})
	conf, err := proc.AdminTLS(cl.Certs)
	if err != nil {
		t.Fatal(err)
	}
	nd.SetAdminTLS(conf) // its health checks trust the cluster's CA
	admin := adminapi.NewClient(conf, 30*time.Second)
	defer admin.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := adminapi.AddMemberRequest{ID: id, RaftAddr: nd.RaftAddr, Learner: true}
	if err := admin.Do(ctx, http.MethodPost, cl.Nodes[leader].HTTPAddr, "/v1/members/add", req, nil); err != nil {
		t.Fatalf("add learner %s: %v", id, err)
	}
	nd.Start(t)
	nd.WaitHealthy(t)
	return nd
}

// waitAddresses waits until the member list names n members, each with
// its client and admin addresses: a member publishes them a moment after
// it joined, and until then reads cannot be routed to it by id nor its
// metrics scraped.
func waitAddresses(t *testing.T, c *client.Client, n int) {
	t.Helper()
	proc.Eventually(t, "every member's addresses in the member list", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ms, err := c.Members(ctx)
		if err != nil {
			return err
		}
		if len(ms) != n {
			return fmt.Errorf("%d members, want %d", len(ms), n)
		}
		for _, m := range ms {
			if m.ClientAddr == "" || m.HTTPAddr == "" {
				return fmt.Errorf("member %s: client address %q, admin %q", m.ID, m.ClientAddr, m.HTTPAddr)
			}
		}
		return nil
	})
}
