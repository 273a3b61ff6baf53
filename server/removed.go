package server

import (
	"context"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latch-io/latch/server/adminapi"
)

// A member removed from the cluster must not linger answering "no leader":
// it learns of its removal either from the configuration change itself
// (raft then shuts down, ShutdownOnRemove) or, when it was cut off while
// the change committed, from a ready leader whose configuration no longer
// names it. Then Removed is closed and latchd exits.

// Removed is closed when this member learns it was removed from the
// cluster; the member then serves nothing useful and should be closed.
func (s *Server) Removed() <-chan struct{} { return s.member.removedC }

// checkRemoved reports whether this member was removed, and closes
// Removed the first time it finds out.
func (s *Server) checkRemoved(ctx context.Context) bool {
	removed := s.raft.State() == raft.Shutdown && s.running() == nil
	by := "raft shut down on its removal"
	if !removed {
		by, removed = s.askPeersIfRemoved(ctx)
	}
	if removed {
		s.member.removedOnce.Do(func() {
			s.log.Error("this member was removed from the cluster (latch member remove); it serves nothing and stops", "how", by)
			close(s.member.removedC)
		})
	}
	return removed
}

// askPeersIfRemoved asks the other recorded members for their status and
// reports whether a ready leader's configuration lacks this member. Only a
// ready leader counts: a lagging follower may hold an older configuration.
func (s *Server) askPeersIfRemoved(ctx context.Context) (string, bool) {
	ms, err := s.store.Members()
	if err != nil {
		return "", false
	}
	ac := s.peerAdmin(2 * time.Second)
	defer ac.CloseIdleConnections()
	for _, m := range ms {
		if m.ID == s.cfg.ID || m.HTTPAddr == "" {
			continue
		}
		st, err := ac.Status(ctx, m.HTTPAddr)
		if err != nil || st.State != raft.Leader.String() || !st.Ready {
			continue
		}
		in := slices.ContainsFunc(st.Members, func(x adminapi.MemberStatus) bool { return x.ID == s.cfg.ID && x.Suffrage != "" })
		if !in {
			return "leader " + st.ID + " no longer lists it", true
		}
	}
	return "", false
}
