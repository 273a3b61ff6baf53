package server

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/session"
)

// A leader that cannot write hands leadership to a member that can.
// Raft elects on liveness, not on a working disk, so a leader whose
// storage cannot take writes would otherwise stay leader while the
// cluster serves nothing that needs it:
//
//   - Disk full (raftnode/diskfull.go): below MinFreeSpace the leader refuses
//     proposals and its FSM waits, so new sessions, writes and the
//     linearizable reads that wait for its FSM stop too. Each disk poll
//     (raftnode.DiskPoll) that finds it full and leading, it asks the other voters
//     for their status (GET /v1/status) and transfers leadership to the
//     most up-to-date one that reports space (no_space false), with
//     raft's LeadershipTransferToServer: the leader brings the target's
//     log up to date, then tells it to start its election at once. So a
//     full leader is replaced within a poll, a status round trip and one
//     election, well under a second on a LAN. When no voter has space it
//     stays leader and keeps refusing writes; the warning says so.
//   - A storage fault (storagefault.go): the failing member hands over to
//     the same kind of target before raft stops, or to raft's own choice
//     (the most up-to-date follower) when no status answers.
//   - A disk that stops answering (raftnode/stall.go): a raft log write that has
//     not returned after StorageStallTimeout makes the member fail; its
//     leader loop is stuck in that write, so the hand-over cannot run, and
//     latchd exits at once so that the others elect as after a crash.
//
// The old leader goes on as a follower: with a full disk it stays
// behind (its FSM waits) and catches up from the log when space returns;
// nothing acknowledged is lost, since every entry was committed by a
// majority that includes members with space.

// handOffQuery bounds how long a hand-over waits for the other members'
// status.
const handOffQuery = time.Second

var (
	// errNoHandOffTarget: no other voter answered with free space.
	errNoHandOffTarget = errors.New("latch: no other voter reports free space")
	// errNoMemberAddrs: no other voter's admin address is recorded.
	errNoMemberAddrs = errors.New("latch: no other voter's admin address is known")
)

// handOffLeadership transfers leadership to the most up-to-date voter with
// free space. It returns nil at once when this member does not lead. It
// needs the other members' admin addresses from the applied member
// records: a member whose disk was full before it ever applied them (a
// new cluster) has none and returns errNoMemberAddrs rather than hand
// leadership to a member that may be as full (two full members would
// pass it back and forth).
func (s *Server) handOffLeadership(ctx context.Context, reason string) error {
	if s.raft.State() != raft.Leader {
		return nil
	}
	target, err := s.handOffTarget(ctx)
	if err != nil {
		return err
	}
	s.log.Warn("handing leadership over", "reason", reason,
		"to", target.ID, "its_last_log_index", target.LastLogIndex)
	f := s.raft.LeadershipTransferToServer(raft.ServerID(target.ID), raft.ServerAddress(target.RaftAddr))
	if err := f.Error(); err != nil {
		return fmt.Errorf("latch: leadership transfer to %s: %w", target.ID, err)
	}
	return nil
}

// handOffTarget asks every other voter for its status and returns the one
// with free space and the longest log.
func (s *Server) handOffTarget(ctx context.Context) (adminapi.Status, error) {
	fut := s.raft.GetConfiguration()
	if err := fut.Error(); err != nil {
		return adminapi.Status{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, handOffQuery)
	defer cancel()
	ac := s.peerAdmin(handOffQuery)
	defer ac.CloseIdleConnections()
	answers := make(chan adminapi.Status)
	asked := 0
	for _, srv := range fut.Configuration().Servers {
		id := string(srv.ID)
		if id == s.cfg.ID || srv.Suffrage != raft.Voter {
			continue
		}
		m := s.memberInfo(id)
		if m.HTTPAddr == "" {
			continue
		}
		asked++
		go func() {
			st, err := ac.Status(ctx, m.HTTPAddr)
			if err != nil || st.ID != id || st.NoSpace || st.State != raft.Follower.String() {
				st = adminapi.Status{}
			}
			st.RaftAddr = string(srv.Address)
			answers <- st
		}()
	}
	if asked == 0 {
		return adminapi.Status{}, errNoMemberAddrs
	}
	var best adminapi.Status
	for range asked {
		st := <-answers
		if st.ID != "" && (best.ID == "" || st.LastLogIndex > best.LastLogIndex) {
			best = st
		}
	}
	if best.ID == "" {
		return best, fmt.Errorf("%w (asked %d)", errNoHandOffTarget, asked)
	}
	return best, nil
}

// diskPolled is the disk guard's poll (raftnode.DiskGuard.Loop): a full
// leader hands leadership over, one hand-over at a time.
func (s *Server) diskPolled(full bool) {
	switch {
	case !full:
		s.diskFull.reset()
	case s.raft.State() == raft.Leader:
		s.diskFull.start(s, "disk full")
	}
}

// handOff runs one hand-over at a time in the background, for the disk
// poll: a poll never waits for a transfer. A failure is logged once until
// reset (when the disk has space again), not at every poll.
type handOff struct {
	running atomic.Bool
	warned  atomic.Bool
}

func (h *handOff) start(s *Server, reason string) {
	if !h.running.CompareAndSwap(false, true) {
		return
	}
	s.goFunc(func() {
		defer h.running.Store(false)
		ctx, cancel := context.WithTimeout(s.ctx, handOffQuery+2*s.cfg.ElectionTimeout)
		defer cancel()
		err := s.handOffLeadership(ctx, reason)
		if err != nil && !h.warned.Swap(true) {
			s.log.Warn("this leader cannot write and could not hand leadership over; it goes on refusing writes", "reason", reason, "err", err)
		}
	})
}

// reset lets the next failure be logged again.
func (h *handOff) reset() { h.warned.Store(false) }

// handOver is a planned or forced stop's hand-over (Close on SIGTERM, a
// storage fault): when this member leads and another voter exists, it
// transfers leadership to the most up-to-date voter with space
// (handOffLeadership), else to raft's own pick, so the successor campaigns
// at once instead of waiting out a timeout. It returns when the transfer
// ended (raft bounds it by an election timeout), then closes the client
// connections with ConnNotLeader: clients find the new leader while this
// member still answers probes.
func (s *Server) handOver(reason string) {
	if s.raft == nil || s.raft.State() != raft.Leader {
		return
	}
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	others := 0
	for _, srv := range f.Configuration().Servers {
		if srv.Suffrage == raft.Voter && srv.ID != raft.ServerID(s.cfg.ID) {
			others++
		}
	}
	if others == 0 {
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), handOffQuery+2*s.cfg.ElectionTimeout)
	err := s.handOffLeadership(ctx, reason)
	cancel()
	if errors.Is(err, errNoHandOffTarget) || errors.Is(err, errNoMemberAddrs) {
		err = s.raft.LeadershipTransfer().Error()
	}
	if err != nil {
		if !errors.Is(err, raft.ErrRaftShutdown) {
			s.log.Warn("leadership transfer before stopping failed", "reason", reason, "err", err)
		}
		return
	}
	_, to := s.raft.LeaderWithID()
	s.log.Info("leadership handed over before stopping", "reason", reason, "to", to, "took", time.Since(start))
	if s.front != nil {
		s.front.dropClients(session.ConnNotLeader, "leadership handed over: this member is stopping")
	}
}
