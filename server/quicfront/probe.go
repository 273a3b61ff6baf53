package quicfront

import (
	"github.com/latch-io/latch/session"
)

// leadershipMoved closes every client connection when this member stops
// being the ready leader: clients connect to the leader only, and a
// deposed leader cut off from the others (a partition) would otherwise
// keep their lock waits, keepalives and requests answering "not the
// leader" without naming a successor. Closing sends them to look for
// the new leader at once; their sessions, lock requests and watches
// resume there.
func (f *Front) leadershipMoved() {
	sub, cancel := f.parts.Leader.SubscribeLeadership()
	defer cancel()
	was := false
	for {
		select {
		case <-f.ctx.Done():
			return
		case ready := <-sub:
			if was && !ready {
				f.log.Info("leadership lost: closing client connections")
				f.DropClients(session.ConnNotLeader, "leadership moved")
			}
			was = ready
		}
	}
}

// probeLoop answers leader probes (session.Probe) on the client port
// until the listener closes. The ready leader also answers a client's
// ask for admission with a slot on its schedule (queue.go).
func (f *Front) probeLoop() {
	for {
		nonce, ask, from, err := f.ln.ReadProbe(f.ctx)
		if err != nil {
			return
		}
		if !f.adm.probe(remoteHost(from)) {
			continue // a flood from one host: dropped before it costs more
		}
		a := session.ProbeAnswer{Member: f.cfg.ID, IsLeader: f.parts.Leader.Serving() == nil}
		a.Leader = f.parts.Leader.LeaderClientAddr()
		if ask.Connect && a.IsLeader {
			a.Admit, a.Wait = f.adm.reserve(from, ask.Resume)
		}
		if err := f.ln.AnswerProbe(nonce, from, a); err != nil {
			f.log.Debug("probe answer not sent", "to", from, "err", err)
		}
	}
}
