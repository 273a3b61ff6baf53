package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latch-io/latch/server/servertest"
)

// A cache holder cut off from the leader: its cache serves no longer than
// its lease, so no write that completed is read stale from the cache (see
// the Guarantees in the README). The members run in process with raft on
// servertest's in-memory network, which the test cuts; the holder's QUIC
// goes over loopback.

// TestCachedReadsHolderCutOff cuts a cache holder off from the
// leader while it keeps reading a node with Cached() and another client
// sets it, two ways: the holder's own traffic (its QUIC packets go
// through a UDP relay that starts dropping everything: the leader cannot
// deliver the invalidation and acknowledges the write once the holder's
// lease ran out), and the leader's (its raft traffic is cut: the other
// members elect a new leader, which knows no caches, and a write there is
// acknowledged). Either way the holder serves nothing from its cache
// after the write completed: porcupine finds each history linearizable.
// The holder's run with the holder serving its cache past the lease (a
// planted bug) is caught. (The leader's run has no such twin: the cut-off
// leader ends the cache stream when it fails to confirm its leadership
// for a lease renewal, before a new leader exists, and the client drops
// its cache with the stream, lease or not.)
func TestCachedReadsHolderCutOff(t *testing.T) {
	c := servertest.StartCluster(t, 3, &servertest.Options{InMemory: true})
	c.WaitLeader()
	c.WaitMembers()
	for _, cut := range []struct {
		name    string
		planted bool // also run with the bug planted, which must be caught
		run     func(t *testing.T, key string, servePastLease bool) (*regHistory, uint64)
	}{
		{"holder", true, func(t *testing.T, key string, plant bool) (*regHistory, uint64) {
			return cutOffCacheHolder(t, c, key, plant, holderCut(c))
		}},
		{"leader", false, func(t *testing.T, key string, plant bool) (*regHistory, uint64) {
			return cutOffCacheHolder(t, c, key, plant, leaderCut(c))
		}},
	} {
		t.Run(cut.name, func(t *testing.T) {
			h, hits := cut.run(t, "/cut-"+cut.name, false)
			if err := h.check(t); err != nil {
				t.Fatal(err)
			}
			if hits == 0 {
				t.Fatal("the holder served nothing from its cache once cut off: the run did not test the lease")
			}
			if !cut.planted {
				return
			}
			h, _ = cut.run(t, "/cut-"+cut.name+"-planted", true)
			err := h.check(t)
			if err == nil {
				t.Fatal("the checker passed a history in which a cut-off holder served its cache past the lease")
			}
			t.Logf("planted bug caught: %v", err)
		})
	}
}

// cacheCut is one way of cutting a cache holder off from the leader:
// holder is where the holder connects (it must end up on leader), cut
// cuts, ready returns once a write may be acknowledged without the
// holder, and heal undoes the cut.
type cacheCut struct {
	holder func(leader int) string
	cut    func(leader int) error
	ready  func(t *testing.T, leader int)
	heal   func(t *testing.T)
}

// holderCut puts the holder behind a UDP relay to the leader and drops
// its packets.
func holderCut(c *servertest.Cluster) func(t *testing.T) cacheCut {
	return func(t *testing.T) cacheCut {
		var relay *udpRelay
		return cacheCut{
			holder: func(leader int) string {
				relay = startRelay(t, c.Server(leader).ClientAddr())
				return relay.addr()
			},
			cut:   func(int) error { relay.cut.Store(true); return nil },
			ready: func(*testing.T, int) {},
			heal:  func(*testing.T) { relay.cut.Store(false) },
		}
	}
}

// leaderCut cuts the leader's raft traffic, the holder connected to it:
// ready waits until the old leader stepped down and another leads.
func leaderCut(c *servertest.Cluster) func(t *testing.T) cacheCut {
	return func(t *testing.T) cacheCut {
		return cacheCut{
			holder: func(leader int) string { return c.Server(leader).ClientAddr() },
			cut: func(leader int) error {
				c.Partition([]int{leader}, []int{(leader + 1) % 3, (leader + 2) % 3})
				return nil
			},
			ready: func(t *testing.T, leader int) {
				servertest.Eventually(t, "a new leader, the old one stepped down", func() error {
					if c.Server(leader).IsLeader() {
						return errors.New("the old leader still leads")
					}
					other := c.Server((leader + 1) % 3)
					if id, _ := other.Leader(); id == "" || id == c.Server(leader).ID() {
						return fmt.Errorf("%s follows %q", other.ID(), id)
					}
					return nil
				})
			},
			heal: func(t *testing.T) {
				c.Heal()
				c.WaitLeader()
			},
		}
	}
}

// cutOffCacheHolder runs one scenario of TestCachedReadsHolderCutOff on
// key and returns its history and how many reads the cut-off holder
// answered from its cache; servePastLease plants the bug.
func cutOffCacheHolder(t *testing.T, c *servertest.Cluster, key string, servePastLease bool, mk func(t *testing.T) cacheCut) (*regHistory, uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cut := mk(t)
	li := c.WaitLeader()
	leaderID := c.Server(li).ID()
	var others []string
	for i := range c.N() {
		if i != li {
			others = append(others, c.Server(i).ClientAddr())
		}
	}
	// The writer knows the other members only: once the cut is made it
	// writes on their side.
	writer := dialReads(t, c.Certs(), others, nil, nil)
	// The holder gives a silent leader up only after long: its cache must
	// be safe by the lease alone, not because it noticed the cut.
	holder := dialReads(t, c.Certs(), []string{cut.holder(li)}, nil, func(cfg *Config) {
		cfg.LeaderReads = true
		cfg.FailureTimeout, cfg.IdleFailureTimeout = 20*time.Second, 20*time.Second
	})
	defer holder.Close()
	h := newRegHistory()
	if _, err := writer.Create(ctx, key, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.set(ctx, writer, 1, key, "v1"); err != nil {
		t.Fatal(err)
	}
	waitCacheHit(t, holder, key)
	if holder.Member() != leaderID {
		t.Fatalf("the holder is connected to %q, not the leader %s: a leader change", holder.Member(), leaderID)
	}
	if err := h.get(ctx, holder, 0, key, Cached()); err != nil {
		t.Fatal(err)
	}
	if servePastLease {
		holder.cache.mu.Lock()
		holder.cache.servePastLease = true
		holder.cache.mu.Unlock()
	}
	hits0 := holder.CacheStats().Hits
	if err := cut.cut(li); err != nil {
		t.Fatalf("cannot cut: %v", err)
	}
	healed := false
	defer func() {
		if !healed {
			cut.heal(t)
		}
	}()

	// The holder reads on; a read the leader must answer waits for the
	// cut until its deadline and constrains nothing.
	var (
		attempts atomic.Int64
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	wg.Go(func() {
		for !stop.Load() {
			rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			call := h.now()
			data, _, err := holder.Get(rctx, key, Cached())
			ret := h.now()
			rcancel()
			switch {
			case err == nil:
				h.add(key, 0, regInput{}, regOutput{value: string(data)}, call, ret)
			case errors.Is(err, ErrNoNode):
				h.add(key, 0, regInput{}, regOutput{}, call, ret)
			}
			attempts.Add(1)
			time.Sleep(time.Millisecond) // paces the reads, so porcupine's history stays small
		}
	})
	defer func() { stop.Store(true); wg.Wait() }()
	waitAttempts := func(n int64) {
		servertest.Eventually(t, fmt.Sprintf("%d cut-off reads", n), func() error {
			if got := attempts.Load(); got < n {
				return fmt.Errorf("%d", got)
			}
			return nil
		})
	}
	waitAttempts(5)
	cut.ready(t, li)
	start := time.Now()
	if err := h.set(ctx, writer, 1, key, "v2"); err != nil {
		t.Fatal(err)
	}
	waited := time.Since(start)
	waitAttempts(attempts.Load() + 30)
	stop.Store(true)
	wg.Wait()
	healed = true
	cut.heal(t)
	hits := holder.CacheStats().Hits - hits0
	t.Logf("%s (serve past lease %v): the write took %v with the holder cut off; %d cut-off reads, %d from the cache",
		key, servePastLease, waited, attempts.Load(), hits)
	return h, hits
}

// udpRelay forwards UDP datagrams between clients and one member, so that
// a test can cut a client off from that member, both ways, without
// privileges: the member and its other clients are untouched.
type udpRelay struct {
	pc     *net.UDPConn
	target *net.UDPAddr
	cut    atomic.Bool // drop every datagram, both ways
	wg     sync.WaitGroup

	mu  sync.Mutex
	ups map[string]*net.UDPConn // client address -> socket to the member; nil once closed
}

func startRelay(t *testing.T, target string) *udpRelay {
	t.Helper()
	taddr, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := &udpRelay{pc: pc, target: taddr, ups: map[string]*net.UDPConn{}}
	r.wg.Go(r.run)
	t.Cleanup(r.close)
	return r
}

func (r *udpRelay) addr() string { return r.pc.LocalAddr().String() }

// run forwards the clients' datagrams to the member until the relay closes.
func (r *udpRelay) run() {
	buf := make([]byte, 64<<10)
	for {
		n, src, err := r.pc.ReadFromUDP(buf)
		if err != nil {
			return
		}
		if r.cut.Load() {
			continue
		}
		if up := r.upstream(src); up != nil {
			up.Write(buf[:n])
		}
	}
}

// upstream returns the socket that carries src's datagrams to the member,
// making it (and its return path) the first time.
func (r *udpRelay) upstream(src *net.UDPAddr) *net.UDPConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ups == nil {
		return nil
	}
	if up := r.ups[src.String()]; up != nil {
		return up
	}
	up, err := net.DialUDP("udp", nil, r.target)
	if err != nil {
		return nil
	}
	r.ups[src.String()] = up
	r.wg.Go(func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := up.Read(buf)
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				continue // an ICMP error of an earlier datagram (the member was down)
			}
			if !r.cut.Load() {
				r.pc.WriteToUDP(buf[:n], src)
			}
		}
	})
	return up
}

func (r *udpRelay) close() {
	r.pc.Close()
	r.mu.Lock()
	for _, up := range r.ups {
		up.Close()
	}
	r.ups = nil
	r.mu.Unlock()
	r.wg.Wait()
}
