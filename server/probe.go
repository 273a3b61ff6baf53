package server

import (
	"time"

	"github.com/hashicorp/raft"

	"github.com/latch-io/latch/session"
)

// followedLeader returns the leader this member can vouch for: itself
// while raft says it leads, else the leader raft follows while it has not
// timed it out (heard from it within a heartbeat timeout) and did not see
// it crash (crashdetect.go). A crashed leader is not named: until the
// election ends, redirects and probe answers say "no leader yet" rather
// than send clients to a dead member. (Half a heartbeat timeout, as
// before, made a follower that a load starved for 250ms deny a healthy
// leader, and the clients that asked polled on, probing harder.)
func (s *Server) followedLeader() (id string) {
	if s.raft == nil {
		return ""
	}
	if s.raft.State() == raft.Leader {
		return s.cfg.ID
	}
	_, lid := s.raft.LeaderWithID()
	if lid == "" || time.Since(s.raft.LastContact()) > s.cfg.HeartbeatTimeout || lid == s.crash.DeadLeader() {
		return ""
	}
	return string(lid)
}

// leadershipMoved closes every client connection when this member stops
// being the ready leader: clients connect to the leader only, and a
// deposed leader cut off from the others (a partition) would otherwise
// keep their lock waits, keepalives and requests answering "not the
// leader" without naming a successor. Closing sends them to look for
// the new leader at once; their sessions, lock requests and watches
// resume there.
func (f *front) leadershipMoved() {
	sub, cancel := f.s.SubscribeLeadership()
	defer cancel()
	was := false
	for {
		select {
		case <-f.s.stop:
			return
		case ready := <-sub:
			if was && !ready {
				f.log.Info("leadership lost: closing client connections")
				f.dropClients(session.ConnNotLeader, "leadership moved")
			}
			was = ready
		}
	}
}

// probeLoop answers leader probes (session.Probe) on the client port
// until the listener closes. The ready leader also answers a client's
// ask for admission with a slot on its schedule (queue.go).
func (f *front) probeLoop() {
	for {
		nonce, ask, from, err := f.ln.ReadProbe(f.s.ctx)
		if err != nil {
			return
		}
		if !f.adm.probe(remoteHost(from)) {
			continue // a flood from one host: dropped before it costs more
		}
		a := session.ProbeAnswer{Member: f.s.cfg.ID, IsLeader: f.keep.Serving() == nil}
		if id := f.s.followedLeader(); id != "" && id != f.s.cfg.ID {
			a.Leader = f.s.memberInfo(id).ClientAddr
		}
		if ask.Connect && a.IsLeader {
			a.Admit, a.Wait = f.adm.reserve(from, ask.Resume)
		}
		if err := f.ln.AnswerProbe(nonce, from, a); err != nil {
			f.log.Debug("probe answer not sent", "to", from, "err", err)
		}
	}
}
