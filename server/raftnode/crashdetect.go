package raftnode

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
)

// Telling a dead leader from a slow one. Raft's own detector cannot: a
// follower that hears nothing for HeartbeatTimeout starts an election,
// whether the leader crashed or was busy. Short timeouts make failover
// fast and let load depose a busy leader; long ones make load harmless and
// failover slow. latch takes the long timeouts (DefaultConfig: 500ms) for
// the slow case and adds a fast path for the case that has a sure sign:
//
//   - When a member's process dies, its kernel closes its TCP connections
//     (the followers read EOF on the raft connections the leader opened to
//     them) and its raft port refuses new ones. A slow, stopped or
//     partitioned leader does neither: its connections stay open and its
//     port accepts.
//   - So when a follower reads EOF on a raft connection from the member it
//     follows, it dials that member's raft address. Only "connection
//     refused" counts as death; a dial that connects or times out (a
//     stopped process, a partition) leaves raft's timeouts in charge.
//   - A follower that saw the leader dead starts an election at once, the
//     way a leadership transfer does: it sends its own raft a TimeoutNow
//     (over raft's transport, as the leader would), so it campaigns without a pre-vote and the others vote for it even
//     though they have not timed out the old leader yet (they still
//     check its log and term as always: raft's safety is untouched; only
//     the wait is skipped). To avoid a split vote, the surviving voters
//     take turns: the one ranked k-th by id waits k × crashStagger, and
//     campaigns only if no leader emerged meanwhile.
//   - Safety of the session leases (server/doc.go, Failover timing) needs the old
//     leader to stop answering keepalives before a successor serves; a
//     member whose raft port refuses connections has no raft and answers
//     nothing (Close stops the client front before raft; a storage fault
//     stops both).
//
// CrashDetector holds this member's raft and is also the stall watch
// (stalldetect.go), which ranks the voters the same way.
type CrashDetector struct {
	self raft.ServerID
	raft atomic.Pointer[raft.Raft] // set once raft runs
	// trans sends this member's raft its TimeoutNow over raft's own
	// transport (a member may dial itself: its certificate is a
	// member's), so it arrives the way a leadership transfer's does.
	trans raft.Transport
	addr  raft.ServerAddress // this member's raft address
	log   *slog.Logger
	stop  <-chan struct{}
	kick  chan struct{}
	dead  atomic.Value // raft.ServerID of the leader seen dead, until another leads

	// dial reaches a member's raft port under every other layer: plain
	// TCP, or the server's Config.RaftLayer network.
	dial func(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error)
}

// crashStagger is how long the k-th ranked survivor waits before it
// campaigns after a crash (k from 0): longer than one election round
// (votes and an fsync) on a LAN.
const crashStagger = 60 * time.Millisecond

// crashDial bounds the dial that decides whether a leader is dead. A live
// member on the LAN answers a SYN in well under it; a stopped one
// completes the handshake in its kernel.
const crashDial = 200 * time.Millisecond

// NewCrashDetector returns the detector of member self, which works until
// stop closes; dial reaches a member's raft port under every other layer.
// Give it raft's transport (SetTransport) and raft (SetRaft) before Run.
func NewCrashDetector(self string, log *slog.Logger, stop <-chan struct{}, dial func(raft.ServerAddress, time.Duration) (net.Conn, error)) *CrashDetector {
	d := &CrashDetector{self: raft.ServerID(self), log: log, stop: stop, kick: make(chan struct{}, 1), dial: dial}
	d.dead.Store(raft.ServerID(""))
	return d
}

// SetTransport gives the detector raft's transport, over which it sends
// this member's own raft its TimeoutNow.
func (d *CrashDetector) SetTransport(t raft.Transport) { d.trans, d.addr = t, t.LocalAddr() }

// SetRaft gives the detector the member's raft once it runs.
func (d *CrashDetector) SetRaft(r *raft.Raft) { d.raft.Store(r) }

// PeerClosed is called when a raft connection accepted from member id
// ended (EOF or reset). It never blocks.
func (d *CrashDetector) PeerClosed(id string) {
	r := d.raft.Load()
	if r == nil || r.State() != raft.Follower {
		return
	}
	if _, lid := r.LeaderWithID(); lid == "" || string(lid) != id {
		return
	}
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// DeadLeader returns the id of the leader this member saw die, while no
// other leader is known; "" otherwise.
func (d *CrashDetector) DeadLeader() raft.ServerID {
	id := d.dead.Load().(raft.ServerID)
	if id == "" {
		return ""
	}
	if r := d.raft.Load(); r == nil {
		return ""
	} else if _, lid := r.LeaderWithID(); lid != "" && lid != id {
		d.dead.Store(raft.ServerID(""))
		return ""
	}
	return id
}

// Run checks the leader on every kick until stop.
func (d *CrashDetector) Run() {
	for {
		select {
		case <-d.stop:
			return
		case <-d.kick:
			d.check()
		}
	}
}

func (d *CrashDetector) check() {
	r := d.raft.Load()
	if r == nil {
		return
	}
	addr, lid := r.LeaderWithID()
	if lid == "" || r.State() != raft.Follower {
		return
	}
	if !portDead(d.dial, addr) {
		return // alive (slow, stopped) or cut off: raft's timeouts decide
	}
	d.dead.Store(lid)
	rank := d.Rank(lid)
	d.log.Warn("the leader's raft port refuses connections: it is down; electing now", "leader", lid, "rank", rank)
	if rank < 0 {
		return // not a voter
	}
	if rank > 0 {
		t := time.NewTimer(time.Duration(rank) * crashStagger)
		defer t.Stop()
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		if _, now := r.LeaderWithID(); (now != "" && now != lid) || r.State() != raft.Follower {
			return // someone was elected, or raft moved on by itself
		}
	}
	if r.State() != raft.Follower {
		return
	}
	req := &raft.TimeoutNowRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(d.self), Addr: []byte(d.addr)}}
	if err := d.trans.TimeoutNow(d.self, d.addr, req, &raft.TimeoutNowResponse{}); err != nil {
		d.log.Warn("could not start the election at once; raft's timeout will", "err", err)
		return
	}
	d.log.Info("campaigning at once: the leader crashed", "leader", lid)
}

// portDead reports whether nothing serves addr (dialed with dial): the
// dial is refused, or it connects and is reset at once. The second case is a crash seen
// mid-way: the dead process's kernel sent FIN on its connections before
// it closed its listening socket, and the dial landed in the backlog of a
// socket about to go. A live member's TLS layer waits for our hello
// instead, silent until the deadline; a stopped one's kernel accepts and
// waits too. Only refusal or reset counts.
func portDead(dial func(raft.ServerAddress, time.Duration) (net.Conn, error), addr raft.ServerAddress) bool {
	c, err := dial(addr, crashDial)
	if err != nil {
		return errors.Is(err, syscall.ECONNREFUSED)
	}
	defer c.Close()
	return closedAtOnce(c)
}

// closedAtOnce reports whether the peer of c resets or closes it within
// crashDial without sending a byte.
func closedAtOnce(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(crashDial))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF)
}

// Rank is this member's place among the voters other than dead, by id; -1
// when it is not a voter.
func (d *CrashDetector) Rank(dead raft.ServerID) int {
	f := d.raft.Load().GetConfiguration()
	if f.Error() != nil {
		return -1
	}
	var ids []raft.ServerID
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && s.ID != dead {
			ids = append(ids, s.ID)
		}
	}
	slices.Sort(ids)
	return slices.Index(ids, d.self)
}
