package client

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// Stability under load, on real processes (server/doc.go, "No leader
// change without a failure"). Each test counts what a user would see go
// wrong (a term change, a failed call, a lost session); none asserts a
// duration: speed is measured by `latch bench storm`.

// terms reads every running member's raft term.
func terms(t *testing.T, c *proc.Cluster) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, nd := range c.Nodes {
		if !nd.Running() {
			continue
		}
		st, err := nd.Status()
		if err != nil {
			t.Fatalf("status of %s: %v", nd.ID, err)
		}
		out[nd.ID] = st.Term
	}
	return out
}

// maxTerm is the highest term any running member reports.
func maxTerm(t *testing.T, c *proc.Cluster) uint64 {
	t.Helper()
	var m uint64
	for _, v := range terms(t, c) {
		m = max(m, v)
	}
	return m
}

// metric sums the samples of a Prometheus series (its name and, when
// given, a label fragment such as `reason="failing_host"`) on nd.
func metric(t *testing.T, nd *proc.Node, name, label string) float64 {
	t.Helper()
	code, body, err := nd.Get("/metrics")
	if err != nil || code != 200 {
		t.Fatalf("metrics of %s: %d %v", nd.ID, code, err)
	}
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? (\S+)$`)
	var sum float64
	for _, m := range re.FindAllStringSubmatch(body, -1) {
		if label != "" && !strings.Contains(m[1], label) {
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatalf("metric %s: %v", m[0], err)
		}
		sum += v
	}
	return sum
}

// dialCert dials c with a client certificate for identity, TTL ttl.
func dialCert(t *testing.T, c *proc.Cluster, identity string, ttl time.Duration) *Client {
	t.Helper()
	cert, key, err := c.Certs.Client(identity)
	if err != nil {
		t.Fatal(err)
	}
	tlsConf, err := session.ClientTLS(c.Certs.CA, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), proc.WaitTimeout)
	defer cancel()
	cl, err := Dial(ctx, Config{Endpoints: c.ClientAddrs(), TLS: tlsConf, SessionTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// lockLoop runs lock/unlock cycles on path until stop, failing the test on
// any error: a call fails only when its context ends, never because the
// cluster was busy or changed leaders.
type lockLoop struct {
	cycles atomic.Int64
	err    atomic.Value
	wg     sync.WaitGroup
	stop   chan struct{}
}

func startLockLoops(cl *Client, n int, prefix string) *lockLoop {
	l := &lockLoop{stop: make(chan struct{})}
	for i := range n {
		l.wg.Go(func() {
			m := NewMutex(cl.Session(), fmt.Sprintf("%s/%d", prefix, i))
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), proc.WaitTimeout)
				err := m.Lock(ctx)
				if err == nil {
					err = m.Unlock(ctx)
				}
				cancel()
				if err != nil {
					l.err.CompareAndSwap(nil, fmt.Errorf("worker %d after %d cycles: %w", i, l.cycles.Load(), err))
					return
				}
				l.cycles.Add(1)
			}
		})
	}
	return l
}

func (l *lockLoop) finish(t *testing.T) int64 {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	if err, _ := l.err.Load().(error); err != nil {
		t.Fatalf("a lock call failed: %v", err)
	}
	return l.cycles.Load()
}

// waitCycles waits until the loops completed more than n cycles in all.
func (l *lockLoop) waitCycles(t *testing.T, n int64, what string) {
	t.Helper()
	proc.Eventually(t, what, func() error {
		if err, _ := l.err.Load().(error); err != nil {
			return err
		}
		if got := l.cycles.Load(); got <= n {
			return fmt.Errorf("%d lock cycles, want more than %d", got, n)
		}
		return nil
	})
}

// TestHandshakeFloodKeepsLeader: a process without a client certificate
// opens QUIC handshakes and sends leader probes as fast as it can while a
// certificate client runs lock cycles. Admission control refuses the
// failing host before it costs a signature; the leader keeps its term and
// the certificate client's calls all succeed.
func TestHandshakeFloodKeepsLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := proc.StartClusterCerts(t, 3, func(certs session.DevCerts, _ int) []string {
		return []string{"--tls-client-ca", certs.CA}
	})
	leader := c.Nodes[c.WaitLeader(t)]
	cl := dialCert(t, c, proc.AdminName, 10*time.Second)
	before := terms(t, c)

	loops := startLockLoops(cl, 4, "/flood")
	loops.waitCycles(t, 20, "lock cycles before the flood")

	// The flood: handshakes without a certificate from 32 goroutines, and
	// leader probes from 8, until enough were refused and the lock loops
	// went on meanwhile.
	noCert, err := session.ClientTLS(c.Certs.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	noCert.ClientSessionCache = nil
	fctx, fcancel := context.WithCancel(context.Background())
	var flood sync.WaitGroup
	var dials, probes atomic.Int64
	for range 32 {
		flood.Go(func() {
			for fctx.Err() == nil {
				dctx, cancel := context.WithTimeout(fctx, time.Second)
				// TLS 1.3 lets the client finish before the server checks
				// its certificate: the dial may "succeed", then the
				// server closes the connection.
				if conn, err := session.Dial(dctx, leader.ClientAddr, noCert, session.Config{}); err == nil {
					conn.Close()
				}
				cancel()
				dials.Add(1)
			}
		})
	}
	for range 8 {
		flood.Go(func() {
			for fctx.Err() == nil {
				pctx, cancel := context.WithTimeout(fctx, 50*time.Millisecond)
				session.Probe(pctx, leader.ClientAddr, 0)
				cancel()
				probes.Add(1)
			}
		})
	}
	mid := loops.cycles.Load()
	proc.Eventually(t, "handshakes of the failing host refused", func() error {
		if n := metric(t, leader, "latch_admission_refused_total", `reason="failing_host"`); n < 100 {
			return fmt.Errorf("%v refused", n)
		}
		return nil
	})
	loops.waitCycles(t, mid+20, "lock cycles during the flood")
	fcancel()
	flood.Wait()
	cycles := loops.finish(t)

	if after := terms(t, c); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("terms changed under the flood: %v -> %v (a leader change without a failure)", before, after)
	}
	t.Logf("%d lock cycles, %d handshake attempts and %d probes of the flood", cycles, dials.Load(), probes.Load())
}

// TestRollingRestartLosesNothing stops every member in turn with SIGTERM
// (a deploy) while lock cycles run: the leader hands leadership over
// before it stops, the clients follow, and no call fails and no session
// or held lock is lost.
func TestRollingRestartLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := proc.StartCluster(t, 3)
	c.WaitLeader(t)
	cl := dialProcCluster(t, c, 10*time.Second)
	loops := startLockLoops(cl, 4, "/roll")
	loops.waitCycles(t, 10, "lock cycles before the restarts")
	for i, nd := range c.Nodes {
		was := c.WaitLeader(t) == i
		if code := nd.Stop(t); code != 0 {
			t.Fatalf("%s exited %d after SIGTERM\n%s", nd.ID, code, nd.Logs())
		}
		if was && !strings.Contains(nd.Logs(), "leadership handed over before stopping") {
			t.Errorf("leader %s stopped without handing leadership over:\n%s", nd.ID, nd.Logs())
		}
		mid := loops.cycles.Load()
		loops.waitCycles(t, mid+10, "lock cycles with "+nd.ID+" down")
		nd.Restart(t)
		nd.WaitHealthy(t)
		c.WaitLeader(t)
	}
	loops.waitCycles(t, loops.cycles.Load()+10, "lock cycles after the restarts")
	t.Logf("%d lock cycles over the rolling restart", loops.finish(t))
	select {
	case <-cl.Session().Done():
		t.Fatalf("session lost over the rolling restart: %v", cl.Session().Err())
	default:
	}
}

// TestLeaderKillKeepsEverySession holds many sessions, one connection each,
// and SIGKILLs the leader: a survivor sees the leader's raft port refuse
// connections and starts the election at once (crashdetect.go), every
// client reconnects to the new leader (admission lets them in at the rate
// it can serve, the reconnect grace covers the wait), no session is lost
// and the reconnect storm costs the new leader no term.
func TestLeaderKillKeepsEverySession(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	const clients = 150
	c := proc.StartCluster(t, 3)
	leader := c.WaitLeader(t)
	// The tickets the clients get must open on the next leader: every
	// member must hold the others' ticket keys before the kill.
	waitTicketKeysShared(t, c)
	cls := dialEach(t, c, clients, 16, 5*time.Second)

	c.Nodes[leader].Kill(t)
	next := c.WaitLeader(t)
	term := maxTerm(t, c)

	// Every client makes a call on the new leader; none may fail.
	lost, failed := callEach(t, cls)
	if lost > 0 || failed > 0 {
		t.Fatalf("%d of %d sessions lost, %d calls failed over the failover", lost, clients, failed)
	}
	if now := maxTerm(t, c); now != term {
		t.Fatalf("term %d after the election, %d once the clients were back: the reconnect storm cost an election", term, now)
	}
	// The members share their TLS ticket keys (server/quicfront/ticketkeys.go): the
	// clients resume, with the old leader's tickets, on the new one.
	if resumed := metric(t, c.Nodes[next], "latch_client_handshakes_total", `resumed="true"`); resumed < clients/2 {
		t.Errorf("the new leader resumed %v of %d reconnections: ticket keys not shared", resumed, clients)
	}
	if nd := c.Nodes[next]; !strings.Contains(nd.Logs(), "campaigning at once: the leader crashed") {
		t.Errorf("the new leader %s was not elected by the crash detector's shortcut:\n%s", nd.ID, nd.Logs())
	}
	var errs []error
	for _, cl := range cls {
		if err := cl.Session().Err(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// TestClientsHoldSessionsWhileNoLeaderTakesThemBack: the leader is killed
// while a follower is stopped, so the last member cannot win an election
// and answers every probe "no leader yet" for longer than the clients'
// plain grace (a TTL past their lease end). A client the cluster answers
// but has not taken back must not give its session up (the cluster holds
// it: a new leader gives every session a full TTL plus the reconnect
// grace), so when the follower continues and a leader is elected, every
// session comes back. Before session.Tracker.Hold the clients declared
// their sessions expired at the end of the plain grace and never resumed
// them: the cause of the sessions lost by `latch bench storm --kill` once
// the new leader took longer than that to admit 2,000 clients.
func TestClientsHoldSessionsWhileNoLeaderTakesThemBack(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	const clients = 20
	const ttl = 2 * time.Second
	c := proc.StartCluster(t, 3)
	leader := c.WaitLeader(t)
	cls := make([]*Client, clients)
	for i := range cls {
		cls[i] = dialCert(t, c, fmt.Sprintf("holder-%d", i), ttl)
	}
	follower := (leader + 1) % len(c.Nodes)
	c.Nodes[follower].Pause(t)
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			c.Nodes[follower].Resume(t)
		}
	})
	c.Nodes[leader].Kill(t)

	// Past every session's plain grace (its proven lease end plus a TTL,
	// and a second for the keepalive loop to look): no leader exists,
	// the last member answers probes, and every session must still live.
	var end time.Time
	for _, cl := range cls {
		if e := cl.Session().LeaseEnd(); e.After(end) {
			end = e
		}
	}
	giveUp := time.NewTimer(time.Until(end.Add(ttl + time.Second)))
	<-giveUp.C
	for i, cl := range cls {
		if err := cl.Session().Err(); err != nil {
			t.Fatalf("client %d gave its session up while the cluster was electing: %v", i, err)
		}
	}

	c.Nodes[follower].Resume(t)
	resumed = true
	c.WaitLeader(t)
	// An ephemeral create needs the session alive on the new leader.
	callEachWith(t, cls, "create after the election", func(ctx context.Context, i int, cl *Client) error {
		_, err := cl.Create(ctx, fmt.Sprintf("/held-%d", i), nil, Ephemeral())
		return err
	})
}

// waitTicketKeysShared waits until every member logged that it holds
// every member's TLS ticket key.
func waitTicketKeysShared(t *testing.T, c *proc.Cluster) {
	t.Helper()
	proc.Eventually(t, "ticket keys shared", func() error {
		for _, nd := range c.Nodes {
			if !strings.Contains(nd.Logs(), "TLS ticket keys shared with every member") {
				return fmt.Errorf("%s has not fetched every member's ticket key", nd.ID)
			}
		}
		return nil
	})
}

// dialEach dials n clients, each with its own ticket cache (as separate
// processes have), at most parallel at once (0: all at once), and closes
// them at the end of the test.
func dialEach(t *testing.T, c *proc.Cluster, n, parallel int, ttl time.Duration) []*Client {
	t.Helper()
	return dialEachConfig(t, c, n, parallel, Config{SessionTTL: ttl})
}

// dialEachConfig is dialEach with cfg for every client (its Endpoints and
// TLS are the cluster's).
func dialEachConfig(t *testing.T, c *proc.Cluster, n, parallel int, cfg Config) []*Client {
	t.Helper()
	tlsConf, err := session.ClientTLS(c.Certs.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	cls := make([]*Client, n)
	t.Cleanup(func() {
		for _, cl := range cls {
			if cl != nil {
				cl.Close()
			}
		}
	})
	if parallel <= 0 {
		parallel = n
	}
	var wg sync.WaitGroup
	var dialErr atomic.Value
	sem := make(chan struct{}, parallel)
	for i := range cls {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), proc.WaitTimeout)
			defer cancel()
			conf := tlsConf.Clone()
			conf.ClientSessionCache = session.NewTicketCache()
			cc := cfg
			cc.Endpoints, cc.TLS = c.ClientAddrs(), conf
			cl, err := Dial(ctx, cc)
			if err != nil {
				dialErr.CompareAndSwap(nil, fmt.Errorf("client %d: %w", i, err))
				return
			}
			cls[i] = cl
		})
	}
	wg.Wait()
	if err, _ := dialErr.Load().(error); err != nil {
		t.Fatal(err)
	}
	return cls
}

// callEach makes one call from every client at once and returns how many
// sessions were lost and how many calls failed (each failure reported).
func callEach(t *testing.T, cls []*Client) (lost, failed int) {
	t.Helper()
	return callEachWith(t, cls, "first call after the failover", func(ctx context.Context, _ int, cl *Client) error {
		_, _, err := cl.Exists(ctx, "/")
		return err
	})
}

// callEachWith is callEach with the call given; what names it in failures.
func callEachWith(t *testing.T, cls []*Client, what string, call func(ctx context.Context, i int, cl *Client) error) (lost, failed int) {
	t.Helper()
	var wg sync.WaitGroup
	var nfailed atomic.Int64
	for i, cl := range cls {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), proc.WaitTimeout)
			defer cancel()
			if err := call(ctx, i, cl); err != nil {
				nfailed.Add(1)
				t.Errorf("client %d's %s: %v", i, what, err)
			}
		})
	}
	wg.Wait()
	for i, cl := range cls {
		if err := cl.Session().Err(); err != nil {
			lost++
			t.Errorf("client %d lost its session: %v", i, err)
		}
	}
	return lost, int(nfailed.Load())
}
