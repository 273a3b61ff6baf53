package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/server/apiwire"
	"github.com/latch-io/latch/session"
)

// apiReply is the JSON body of every admin API answer that is not data.
type apiReply = adminapi.Reply

const maxAdminBody = 64 << 10

// httpHandler serves the admin API: health, metrics, status and membership.
func (s *Server) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.handleHealthz)
	mux.HandleFunc("GET /readyz", s.handleReadyz)
	mux.Handle("GET /metrics", promhttp.Handler())
	mux.HandleFunc("GET /v1/status", s.handleStatus)
	mux.HandleFunc("GET /v1/ticket-key", s.memberOrAdmin(s.handleTicketKey))
	mux.HandleFunc("POST /v1/join", s.memberOrAdmin(s.handleJoin))
	mux.HandleFunc("POST /v1/remove", s.memberOrAdmin(s.handleRemove))
	mux.HandleFunc("POST /v1/snapshot", s.memberOrAdmin(s.handleSnapshot))
	s.memberRoutes(mux)
	mux.HandleFunc("GET /v1/hash", s.handleHash)
	mux.HandleFunc("POST /v1/hash-check", s.adminOnly(s.handleHashCheck))
	mux.HandleFunc("GET /v1/limits", s.handleGetLimits)
	mux.HandleFunc("PUT /v1/limits", s.adminOnly(s.handlePutLimits))
	s.backupRoutes(mux)
	s.handlePprof(mux)
	if s.faults != nil {
		mux.HandleFunc("GET /v1/faults", s.memberOrAdmin(s.handleFaults))
		mux.HandleFunc("POST /v1/faults", s.memberOrAdmin(s.handleFaults))
		mux.HandleFunc("POST /v1/faults/storage", s.memberOrAdmin(s.handleStorageFault))
	}
	return mux
}

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	if err := s.running(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if s.raft.State() == raft.Shutdown {
		http.Error(w, "shut down", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if err := s.ready(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ready")
}

// ready is nil when this member knows a leader and has applied everything
// it knows to be committed.
func (s *Server) ready() error {
	if err := s.running(); err != nil {
		return err
	}
	if _, lid := s.raft.LeaderWithID(); lid == "" {
		return errors.New("no leader known")
	}
	if s.raft.State() == raft.Leader && !s.IsLeader() {
		return errors.New("leader has not committed its term barrier yet")
	}
	if !s.caughtUp() {
		return fmt.Errorf("catching up: applied %d, commit %d", s.fsmApplied(), s.raft.CommitIndex())
	}
	return nil
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	st, err := s.Status()
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) handleJoin(w http.ResponseWriter, r *http.Request, by adminCaller) {
	var req joinRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if err := by.mayChange(req.ID, req.Replace); err != nil {
		s.writeError(w, err)
		return
	}
	if s.redirectToLeader(w, r) {
		return
	}
	if err := s.addMember(r.Context(), req, by); err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, apiReply{OK: true})
}

func (s *Server) handleRemove(w http.ResponseWriter, r *http.Request, by adminCaller) {
	var req removeRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if err := by.mayChange(req.ID, false); err != nil {
		s.writeError(w, err)
		return
	}
	if s.redirectToLeader(w, r) {
		return
	}
	if err := s.removeMember(r.Context(), req.ID, by); err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, apiReply{OK: true})
}

func (s *Server) handleSnapshot(w http.ResponseWriter, r *http.Request, _ adminCaller) {
	if wait := s.snapLimit.take(s.cfg.Clock(), s.cfg.SnapshotMinInterval); wait > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(int(wait.Seconds()+1)))
		s.writeError(w, fmt.Errorf("%w: retry in %v (at most one per %v)", session.ErrSnapshotTooSoon, wait.Round(time.Millisecond), s.cfg.SnapshotMinInterval))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	if err := s.Snapshot(ctx); err != nil {
		s.writeError(w, err)
		return
	}
	st, _ := s.Status()
	writeJSON(w, http.StatusOK, apiReply{OK: true, Index: st.SnapshotIndex})
}

// redirectToLeader answers a leader-only request on a follower with a 307
// to the leader's admin address (clients re-send the body), or 503 when no
// leader is known. It reports whether it answered.
func (s *Server) redirectToLeader(w http.ResponseWriter, r *http.Request) bool {
	if s.running() != nil || s.raft.State() == raft.Leader {
		return false
	}
	var nl *NotLeaderError
	errors.As(s.notLeader(), &nl)
	if nl.LeaderHTTPAddr == "" {
		writeJSON(w, http.StatusServiceUnavailable, apiReply{
			Error: "no leader with a known admin address", Code: "no_leader", LeaderID: nl.LeaderID,
		})
		return true
	}
	w.Header().Set("Location", "https://"+nl.LeaderHTTPAddr+r.URL.RequestURI())
	writeJSON(w, http.StatusTemporaryRedirect, apiReply{
		Error: "not the leader", Code: "not_leader", LeaderID: nl.LeaderID, LeaderHTTP: nl.LeaderHTTPAddr,
	})
	return true
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAdminBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, apiReply{Error: "bad request body: " + err.Error(), Code: "bad_request"})
		return false
	}
	return true
}

// writeError maps an error to a status code and JSON body.
func (s *Server) writeError(w http.ResponseWriter, err error) {
	reply := apiReply{Error: err.Error()}
	code := http.StatusInternalServerError
	var nl *NotLeaderError
	switch {
	case errors.As(err, &nl):
		code, reply.Code, reply.LeaderID, reply.LeaderHTTP = http.StatusServiceUnavailable, "not_leader", nl.LeaderID, nl.LeaderHTTPAddr
	case errors.Is(err, ErrBadRequest), errors.Is(err, namespace.ErrBadCommand):
		code, reply.Code = http.StatusBadRequest, "bad_request"
	case errors.Is(err, namespace.ErrBadVersion):
		code, reply.Code = http.StatusConflict, "bad_version"
	case errors.Is(err, namespace.ErrNoMember):
		code, reply.Code = http.StatusNotFound, "no_member"
	case errors.Is(err, ErrNotFresh):
		code, reply.Code = http.StatusConflict, "not_fresh"
	case errors.Is(err, session.ErrAdminDenied):
		code, reply.WireCode = http.StatusForbidden, uint16(session.CodeAdminDenied)
	case errors.Is(err, session.ErrMemberExists):
		code, reply.WireCode = http.StatusConflict, uint16(session.CodeMemberExists)
	case errors.Is(err, session.ErrSnapshotTooSoon):
		code, reply.WireCode = http.StatusTooManyRequests, uint16(session.CodeSnapshotTooSoon)
	case errors.Is(err, ErrClosed), errors.Is(err, ErrNotStarted), errors.Is(err, context.DeadlineExceeded):
		code = http.StatusServiceUnavailable
	}
	if reply.WireCode != 0 {
		reply.Code = session.Code(reply.WireCode).String()
	}
	writeJSON(w, code, reply)
}

// writeJSON answers v as JSON with status code, as the API does.
func writeJSON(w http.ResponseWriter, code int, v any) { apiwire.WriteJSON(w, code, v) }

// snapLimiter spaces the snapshots asked for on the admin endpoint: each
// writes the whole namespace to disk, so a loop of requests would fill it.
type snapLimiter struct {
	mu   sync.Mutex
	last time.Time
}

// take returns 0 and records now when a snapshot may start, else how long
// until one may.
func (l *snapLimiter) take(now time.Time, every time.Duration) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() {
		if wait := l.last.Add(every).Sub(now); wait > 0 {
			return wait
		}
	}
	l.last = now
	return 0
}
