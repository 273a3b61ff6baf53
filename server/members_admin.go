package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/hashicorp/raft"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/adminapi"
)

// The membership endpoints of `latch member`: list, add (as a voter or a
// learner), promote. Removal is POST /v1/remove (RemoveMember).

// ErrNotLearner is the answer to promoting a member that is not a learner
// in the raft configuration.
var ErrNotLearner = errors.New("latch: not a learner")

func (s *Server) memberRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/members", s.handleMembers)
	mux.HandleFunc("POST /v1/members/add", s.adminOnly(s.handleMemberAdd))
	mux.HandleFunc("POST /v1/members/promote", s.adminOnly(s.handleMemberPromote))
}

func (s *Server) handleMembers(w http.ResponseWriter, r *http.Request) {
	ms, err := s.Members()
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, adminapi.MembersReply{Members: ms, Warning: adminapi.VoterWarning(ms)})
}

func (s *Server) handleMemberAdd(w http.ResponseWriter, r *http.Request) {
	var req adminapi.AddMemberRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if s.redirectToLeader(w, r) {
		return
	}
	var err error
	if req.Learner {
		err = s.AddLearner(r.Context(), req.ID, req.RaftAddr)
	} else {
		err = s.addMember(r.Context(), joinRequest{ID: req.ID, RaftAddr: req.RaftAddr}, adminCaller{admin: true})
	}
	s.writeMembers(w, err)
}

func (s *Server) handleMemberPromote(w http.ResponseWriter, r *http.Request) {
	var req adminapi.MemberRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if s.redirectToLeader(w, r) {
		return
	}
	s.writeMembers(w, s.Promote(r.Context(), req.ID))
}

// writeMembers answers a membership change with the new configuration and
// its warning.
func (s *Server) writeMembers(w http.ResponseWriter, err error) {
	if err != nil {
		s.writeError(w, err)
		return
	}
	ms, err := s.Members()
	if err != nil {
		s.writeError(w, err)
		return
	}
	reply := adminapi.MembersReply{Members: ms, Warning: adminapi.VoterWarning(ms)}
	if reply.Warning != "" {
		s.log.Warn("membership changed", "warning", reply.Warning)
	}
	writeJSON(w, http.StatusOK, reply)
}

// AddLearner adds id at raftAddr as a non-voter (a learner): it receives
// the log but does not vote or count for commits until Promote. Leader
// only. Adding a learner that is already one is a no-op; a voter of that
// id is refused (remove it first).
func (s *Server) AddLearner(ctx context.Context, id, raftAddr string) error {
	s.membershipMu.Lock()
	defer s.membershipMu.Unlock()
	if id == "" {
		return fmt.Errorf("%w: member id required", ErrBadRequest)
	}
	if err := checkDialable(raftAddr); err != nil {
		return fmt.Errorf("%w: raft_addr: %v", ErrBadRequest, err)
	}
	if err := s.leaderOnly(ctx); err != nil {
		return err
	}
	srv, ok, err := s.configured(id)
	if err != nil {
		return err
	}
	if ok && srv.Suffrage == raft.Voter {
		return fmt.Errorf("%w: %s is already a voter (remove it first to make it a learner)", ErrBadRequest, id)
	}
	if ok && srv.Address == raft.ServerAddress(raftAddr) {
		return nil
	}
	s.log.Info("adding learner", "id", id, "raft_addr", raftAddr)
	return s.proposeError(waitFuture(ctx, s.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(raftAddr), 0, s.cfg.ApplyTimeout)))
}

// Promote makes learner id a voter. Leader only; promoting a voter is a
// no-op.
func (s *Server) Promote(ctx context.Context, id string) error {
	s.membershipMu.Lock()
	defer s.membershipMu.Unlock()
	if id == "" {
		return fmt.Errorf("%w: member id required", ErrBadRequest)
	}
	if err := s.leaderOnly(ctx); err != nil {
		return err
	}
	srv, ok, err := s.configured(id)
	if err != nil {
		return err
	}
	switch {
	case !ok:
		return fmt.Errorf("%w: %s", namespace.ErrNoMember, id)
	case srv.Suffrage == raft.Voter:
		return nil
	}
	s.log.Info("promoting learner", "id", id)
	return s.proposeError(waitFuture(ctx, s.raft.AddVoter(srv.ID, srv.Address, 0, s.cfg.ApplyTimeout)))
}

// configured returns id's entry in the current raft configuration.
func (s *Server) configured(id string) (raft.Server, bool, error) {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Server{}, false, fmt.Errorf("latch: raft configuration: %w", err)
	}
	for _, srv := range f.Configuration().Servers {
		if string(srv.ID) == id {
			return srv, true, nil
		}
	}
	return raft.Server{}, false, nil
}
