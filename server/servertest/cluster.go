package servertest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server"
	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// Options tune a test cluster. The zero value (or nil) is a cluster with
// short timeouts and default snapshot settings.
type Options struct {
	// Configure adjusts member i's config before it is created (and again
	// before each restart).
	Configure func(i int, cfg *server.Config)
	// Logger receives every member's logs; nil means LATCH_TEST_LOG decides
	// (unset: discard).
	Logger *slog.Logger
	// InMemory carries the members' raft traffic over a Network in memory
	// instead of TCP on loopback (mutual TLS still runs over it), so the
	// test can cut it: Cluster.Partition and Cluster.Heal. Badger stays on
	// disk and clients still reach the members over QUIC on loopback.
	InMemory bool
	// Clock, when set, is the time of every member (Config.Clock and
	// Config.Monotonic): session leases, lock timers and the cluster time
	// move only when the test calls Clock.Advance, and the members look at
	// it every FakeClockTick (Config.ExpiryTick), so a test waits for a
	// TTL without waiting its length. Raft's own timers stay real.
	Clock *session.ManualClock
}

// FakeClockTick is the ExpiryTick of a cluster on Options.Clock: how soon
// after Clock.Advance the leader's reaper and lock clock look again.
const FakeClockTick = 5 * time.Millisecond

// Cluster is a set of in-process members. Its methods fail the test on error.
type Cluster struct {
	t     testing.TB
	opts  Options
	certs session.DevCerts // one PKI for every member's client listener
	net   *Network         // with Options.InMemory; else nil
	start time.Time        // Options.Clock's reading when the cluster started
	mu    sync.Mutex
	nodes []*node
}

type node struct {
	cfg    server.Config
	server *server.Server // nil while stopped
}

// Timing used by in-process test clusters: short enough for quick
// failover, long enough not to flap on two busy CPU cores. It is slower
// than latchd's defaults (server.DefaultConfig: 100ms) on purpose: every
// member of an in-process cluster shares one Go runtime (and -race), so one
// GC or scheduler stall delays them all at once. Real-process tests
// (package proc) and latch chaos run the defaults.
const (
	HeartbeatTimeout   = 400 * time.Millisecond
	ElectionTimeout    = 400 * time.Millisecond
	LeaderLeaseTimeout = 200 * time.Millisecond
	// WaitTimeout bounds every wait of this package.
	WaitTimeout = 20 * time.Second
	// CloseTimeout bounds Stop's wait for a member's Close (a leadership
	// hand-over, raft's shutdown, the HTTP server's, every handler).
	CloseTimeout = time.Minute
)

// AdminName is the identity of the test clusters' admin (Config.Admins);
// AdminTLS presents its certificate.
const AdminName = "servertest-admin"

// Config returns a test member's configuration before Options.Configure:
// free ports on 127.0.0.1 for raft, HTTP and clients (QUIC), data in dir,
// a member certificate of the PKI certs (made by session.EnsureDevCerts;
// its server certificate for the client listener), AdminName as the admin,
// test timings.
func Config(id, dir string, certs session.DevCerts, logger *slog.Logger) server.Config {
	cfg := server.DefaultConfig()
	cfg.ID = id
	cfg.DataDir = dir
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.ClientAddr = "127.0.0.1:0"
	cfg.TLSCert, cfg.TLSKey = certs.ServerCert, certs.ServerKey
	cfg.ClusterCA = certs.CA
	// On failure MemberCert stays empty and server.New says so.
	cfg.MemberCert, cfg.MemberKey, _ = certs.Member(id)
	cfg.Admins = []string{AdminName}
	cfg.HeartbeatTimeout = HeartbeatTimeout
	cfg.ElectionTimeout = ElectionTimeout
	cfg.LeaderLeaseTimeout = LeaderLeaseTimeout
	cfg.CommitTimeout = 5 * time.Millisecond
	cfg.ApplyTimeout = 5 * time.Second
	cfg.Logger = logger
	return cfg
}

// Logger returns the logger LATCH_TEST_LOG asks for: debug, info, warn,
// error to stderr; anything else discards.
func Logger() *slog.Logger {
	var level slog.Level
	switch strings.ToLower(os.Getenv("LATCH_TEST_LOG")) {
	case "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// StartCluster starts n members named n1..nn, bootstraps them together and
// returns once every member is started (not necessarily once a leader is
// elected: use WaitLeader).
func StartCluster(t testing.TB, n int, opts *Options) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	if opts != nil {
		c.opts = *opts
	}
	if c.opts.Logger == nil {
		c.opts.Logger = Logger()
	}
	// TempDir first: cleanups run last-in first-out, and the members must
	// close before their directories are removed.
	root := t.TempDir()
	t.Cleanup(c.Close)
	var err error
	if c.certs, err = session.EnsureDevCerts(filepath.Join(root, "tls")); err != nil {
		t.Fatalf("servertest: %v", err)
	}
	if c.opts.InMemory {
		c.net = NewNetwork()
	}
	if c.opts.Clock != nil {
		c.start = c.opts.Clock.Now()
	}
	var peers []server.Peer
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("n%d", i+1)
		cfg := c.Config(id, filepath.Join(root, id))
		if c.opts.Configure != nil {
			c.opts.Configure(i, &cfg)
		}
		s, err := server.New(cfg)
		if err != nil {
			t.Fatalf("servertest: new %s: %v", id, err)
		}
		// Restarts must come back on the same addresses: peers know them.
		cfg.RaftAddr, cfg.HTTPAddr, cfg.ClientAddr = s.RaftAddr(), s.HTTPAddr(), s.ClientAddr()
		c.nodes = append(c.nodes, &node{cfg: cfg, server: s})
		peers = append(peers, server.Peer{ID: id, RaftAddr: s.RaftAddr()})
	}
	for i, nd := range c.nodes {
		if err := nd.server.Start(); err != nil {
			t.Fatalf("servertest: start n%d: %v", i+1, err)
		}
	}
	for i, nd := range c.nodes {
		if err := nd.server.BootstrapCluster(peers); err != nil {
			t.Fatalf("servertest: bootstrap n%d: %v", i+1, err)
		}
	}
	return c
}

// Certs returns the cluster's PKI (unless Options.Configure replaced it):
// a client trusts Certs().CA; Certs().Member and Certs().Client issue
// further certificates.
func (c *Cluster) Certs() session.DevCerts { return c.certs }

// Config returns the configuration of a new member id in dir on this
// cluster's PKI, network and clock (for joins), before Options.Configure.
func (c *Cluster) Config(id, dir string) server.Config {
	cfg := Config(id, dir, c.certs, c.opts.Logger)
	if c.net != nil {
		cfg.RaftAddr = memNet + ":0"
		cfg.RaftLayer = c.net.Listen
	}
	if clock := c.opts.Clock; clock != nil {
		cfg.Clock = clock.Now
		cfg.Monotonic = func() time.Duration { return clock.Now().Sub(c.start) }
		cfg.ExpiryTick = FakeClockTick
	}
	return cfg
}

// Partition cuts the in-memory network (Options.InMemory) between every
// two members in different groups, replacing earlier cuts: raft
// connections across a cut are reset and dials across it fail. A member
// in no group keeps its links. Clients still reach every member.
func (c *Cluster) Partition(groups ...[]int) {
	c.t.Helper()
	if c.net == nil {
		c.t.Fatal("servertest: Partition needs Options.InMemory")
	}
	addrs := make([][]string, len(groups))
	for g, members := range groups {
		for _, i := range members {
			addrs[g] = append(addrs[g], c.nodes[i].cfg.RaftAddr)
		}
	}
	c.net.Partition(addrs...)
}

// Heal removes every cut of Partition.
func (c *Cluster) Heal() {
	c.t.Helper()
	if c.net == nil {
		c.t.Fatal("servertest: Heal needs Options.InMemory")
	}
	c.net.Heal()
}

// AdminTLS is a TLS config for the members' admin endpoints presenting
// the certificate of identity (AdminName is the admin; "" presents none).
func (c *Cluster) AdminTLS(identity string) *tls.Config {
	c.t.Helper()
	cert, key := "", ""
	if identity != "" {
		var err error
		if cert, key, err = c.certs.Client(identity); err != nil {
			c.t.Fatalf("servertest: %v", err)
		}
	}
	conf, err := session.AdminTLS(c.certs.CA, cert, key)
	if err != nil {
		c.t.Fatalf("servertest: %v", err)
	}
	return conf
}

// Admin returns an admin endpoint client acting as identity (AdminName is
// the admin; "" presents no certificate), closed with the cluster's test.
func (c *Cluster) Admin(identity string) *adminapi.Client {
	a := adminapi.NewClient(c.AdminTLS(identity), 10*time.Second)
	c.t.Cleanup(a.CloseIdleConnections)
	return a
}

// N returns the number of members, running or stopped.
func (c *Cluster) N() int { return len(c.nodes) }

// Server returns member i, or nil while it is stopped.
func (c *Cluster) Server(i int) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].server
}

// Running returns the indexes of the running members.
func (c *Cluster) Running() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for i, nd := range c.nodes {
		if nd.server != nil {
			out = append(out, i)
		}
	}
	return out
}

// Stop closes member i, keeping its data and addresses for Restart.
func (c *Cluster) Stop(i int) {
	c.t.Helper()
	c.mu.Lock()
	s := c.nodes[i].server
	c.nodes[i].server = nil
	c.mu.Unlock()
	if s == nil {
		return
	}
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	t := time.NewTimer(CloseTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			c.t.Errorf("servertest: stop n%d: %v", i+1, err)
		}
	case <-t.C:
		// A Close that never returns would hold the test until go test's
		// own timeout, whose dump a CI log may cut: fail now, with every
		// goroutine. The member is abandoned.
		buf := make([]byte, 32<<20)
		buf = buf[:runtime.Stack(buf, true)]
		c.t.Errorf("servertest: stop n%d: Close did not return within %v; goroutines:\n%s", i+1, CloseTimeout, buf)
	}
}

// Restart starts a stopped member i again on its data dir and addresses.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	nd := c.nodes[i]
	if nd.server != nil {
		c.t.Fatalf("servertest: restart n%d: still running", i+1)
	}
	cfg := nd.cfg
	if c.opts.Configure != nil {
		c.opts.Configure(i, &cfg)
		cfg.RaftAddr, cfg.HTTPAddr, cfg.ClientAddr = nd.cfg.RaftAddr, nd.cfg.HTTPAddr, nd.cfg.ClientAddr
	}
	var s *server.Server
	// The old listeners' ports are free again only once the kernel says so.
	err := proc.Rebind(5*time.Second, func() (err error) {
		s, err = server.New(cfg)
		return err
	})
	if err != nil {
		c.t.Fatalf("servertest: restart n%d: %v", i+1, err)
	}
	if err := s.Start(); err != nil {
		s.Close()
		c.t.Fatalf("servertest: restart n%d: start: %v", i+1, err)
	}
	nd.server = s
}

// Close stops every member. It runs in t.Cleanup.
func (c *Cluster) Close() {
	var wg sync.WaitGroup
	for i := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Stop(i)
		}()
	}
	wg.Wait()
}

// Eventually polls cond until it returns nil or WaitTimeout passes, then
// fails the test with cond's last error.
func Eventually(t testing.TB, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	delay := time.Millisecond
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached after %v: %v", what, WaitTimeout, err)
		}
		time.Sleep(delay) // polling interval of a condition with a deadline
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// WaitLeader waits until exactly one running member is the ready leader and
// every running member agrees on it, and returns its index.
func (c *Cluster) WaitLeader() int {
	c.t.Helper()
	leader := -1
	Eventually(c.t, "leader", func() error {
		leader = -1
		for _, i := range c.Running() {
			s := c.Server(i)
			if s != nil && s.IsLeader() {
				if leader >= 0 {
					return fmt.Errorf("two leaders: n%d and n%d", leader+1, i+1)
				}
				leader = i
			}
		}
		if leader < 0 {
			return errors.New("no ready leader")
		}
		want := c.nodes[leader].cfg.ID
		for _, i := range c.Running() {
			if s := c.Server(i); s != nil {
				if id, _ := s.Leader(); id != want {
					return fmt.Errorf("n%d sees leader %q, want %q", i+1, id, want)
				}
			}
		}
		return nil
	})
	return leader
}

// Propose proposes cmd at the current leader, following leader changes,
// and fails the test if it does not commit. The Result may carry a
// namespace error.
func (c *Cluster) Propose(ctx context.Context, cmd *namespace.Command) *namespace.Result {
	c.t.Helper()
	var res *namespace.Result
	Eventually(c.t, "propose "+cmd.Op.String()+" "+cmd.Path, func() error {
		var last error = errors.New("no running member")
		for _, i := range c.Running() {
			s := c.Server(i)
			if s == nil || !s.IsLeader() {
				continue
			}
			r, err := s.Propose(ctx, cmd)
			if err == nil {
				res = r
				return nil
			}
			if errors.Is(err, server.ErrUnknownOutcome) {
				c.t.Fatalf("servertest: propose outcome unknown: %v", err)
			}
			last = err
		}
		return last
	})
	return res
}

// WaitMembers waits until every running member has recorded metadata of
// every running member, after which no membership writes are pending.
func (c *Cluster) WaitMembers() {
	c.t.Helper()
	Eventually(c.t, "member metadata", func() error {
		for _, i := range c.Running() {
			s := c.Server(i)
			if s == nil {
				continue
			}
			ms, err := s.Store().Members()
			if err != nil {
				return err
			}
			have := map[string]bool{}
			for _, m := range ms {
				have[m.ID] = m.HTTPAddr != ""
			}
			for _, j := range c.Running() {
				if id := c.nodes[j].cfg.ID; !have[id] {
					return fmt.Errorf("n%d lacks metadata of %s", i+1, id)
				}
			}
		}
		return nil
	})
}

// WaitApplied waits until every running member has applied index.
func (c *Cluster) WaitApplied(index uint64) {
	c.t.Helper()
	Eventually(c.t, fmt.Sprintf("all members apply %d", index), func() error {
		for _, i := range c.Running() {
			s := c.Server(i)
			if s == nil {
				continue
			}
			if got := s.Store().AppliedIndex(); got < index {
				return fmt.Errorf("n%d applied %d", i+1, got)
			}
		}
		return nil
	})
}
