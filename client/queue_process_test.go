package client

import (
	"testing"
	"time"

	"github.com/latch-io/latch/server/proc"
)

// TestReconnectStormQueues: the leader of a cluster that admits a tiny
// handshake rate is killed while a hundred clients hold sessions; they all
// reconnect to the new leader at once. Its admission queue (server/quicfront/queue.go)
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
	waitTicketKeysShared(t, c)
	// All at once: twenty a second are admitted, the rest queue or are
	// told to come back.
	cls := dialEach(t, c, clients, 0, 10*time.Second)
	if used := metric(t, c.Nodes[leader], "latch_admission_reservations_total", `event="used"`); used == 0 {
		t.Fatalf("the leader took %d clients in and used no reservation", clients)
	}

	c.Nodes[leader].Kill(t)
	next := c.WaitLeader(t)
	lost, failed := callEach(t, cls)
	if lost > 0 || failed > 0 {
		t.Fatalf("%d of %d sessions lost, %d first calls failed", lost, clients, failed)
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
