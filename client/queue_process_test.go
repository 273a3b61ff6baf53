package client

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// TestReconnectStormQueues: the leader of a cluster that admits a tiny
// handshake rate is killed while a hundred clients hold sessions; they all
// reconnect to the new leader at once. Its admission queue (server/queue.go)
// gives each a slot (or a heard "busy, ask again") instead of refusals that
// quic-go drops: every client's first call succeeds, no session is lost,
// and the new leader took the clients in through reservations their own
// dial sockets held (the probe and the handshake from one address).
func TestReconnectStormQueues(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	const clients = 100
	c := proc.StartCluster(t, 3, "--handshake-rate", "20")
	leader := c.WaitLeader(t)
	proc.Eventually(t, "ticket keys shared", func() error {
		for _, nd := range c.Nodes {
			if !strings.Contains(nd.Logs(), "TLS ticket keys shared with every member") {
				return fmt.Errorf("%s has not fetched every member's ticket key", nd.ID)
			}
		}
		return nil
	})
	tlsConf, err := session.ClientTLS(c.Certs.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	cls := make([]*Client, clients)
	t.Cleanup(func() {
		for _, cl := range cls {
			if cl != nil {
				cl.Close()
			}
		}
	})
	var wg sync.WaitGroup
	var dialErr atomic.Value
	for i := range cls {
		// All at once: twenty a second are admitted, the rest queue or
		// are told to come back.
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), proc.WaitTimeout)
			defer cancel()
			conf := tlsConf.Clone()
			conf.ClientSessionCache = session.NewTicketCache()
			cl, err := Dial(ctx, Config{Endpoints: c.ClientAddrs(), TLS: conf, SessionTTL: 10 * time.Second})
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
	if used := metric(t, c.Nodes[leader], "latch_admission_reservations_total", `event="used"`); used == 0 {
		t.Fatalf("the leader took %d clients in and used no reservation", clients)
	}

	c.Nodes[leader].Kill(t)
	next := c.WaitLeader(t)
	var failed atomic.Int64
	for i, cl := range cls {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), proc.WaitTimeout)
			defer cancel()
			if _, _, err := cl.Exists(ctx, "/"); err != nil {
				failed.Add(1)
				t.Errorf("client %d's first call after the failover: %v", i, err)
			}
		})
	}
	wg.Wait()
	lost := 0
	for _, cl := range cls {
		if err := cl.Session().Err(); err != nil {
			lost++
			t.Errorf("session lost: %v", err)
		}
	}
	if lost > 0 || failed.Load() > 0 {
		t.Fatalf("%d of %d sessions lost, %d first calls failed", lost, clients, failed.Load())
	}
	nd := c.Nodes[next]
	used := metric(t, nd, "latch_admission_reservations_total", `event="used"`)
	made := metric(t, nd, "latch_admission_reservations_total", `event="made"`)
	if used < clients/2 {
		t.Fatalf("the new leader took %d clients back through %v reservations (%v made): the queue was not used", clients, used, made)
	}
	t.Logf("new leader: %v reservations made, %v used, %v expired, %v busy answers, %v refused for rate",
		made, used, metric(t, nd, "latch_admission_reservations_total", `event="expired"`),
		metric(t, nd, "latch_admission_reservations_total", `event="busy"`),
		metric(t, nd, "latch_admission_refused_total", `reason="rate"`))
}
