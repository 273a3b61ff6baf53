package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/server/apiwire"
	"github.com/latch-io/latch/session"
)

// Config is what the endpoint knows of the member besides Member.
type Config struct {
	ID      string // the member's id, named in backups and hash replies
	DataDir string // where a restore upload is kept until it is checked
	Log     *slog.Logger
	// Clock and SnapshotMinInterval space the snapshots POST /v1/snapshot
	// takes.
	Clock               func() time.Time
	SnapshotMinInterval time.Duration
	// Faults adds the fault injection routes; nil leaves them out.
	Faults Faults
	// Errors are the member's sentinels the endpoint answers with their
	// own status codes.
	Errors Errors
}

// Errors are the member's error values with a status of their own. A
// not-leader error is recognized by its LeaderAdmin method (NotLeader).
type Errors struct {
	BadRequest  error   // 400 "bad_request"
	NotFresh    error   // 409 "not_fresh": a restore into a cluster holding data
	Unavailable []error // 503: closed, not started
}

// NotLeader is an error saying this member is not the leader, naming the
// leader (each "" when unknown).
type NotLeader interface {
	error
	LeaderAdmin() (id, httpAddr string)
}

// endpoint is the admin endpoint of one member.
type endpoint struct {
	m         Member
	cfg       Config
	snapLimit snapLimiter
}

// maxBody bounds a JSON request body.
const maxBody = 64 << 10

// New returns the admin endpoint's handler: health, metrics, status,
// membership, snapshots and backups, settings, state hashes, profiles and,
// with Config.Faults, fault injection.
func New(cfg Config, m Member) http.Handler {
	e := &endpoint{m: m, cfg: cfg}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", e.handleHealthz)
	mux.HandleFunc("GET /readyz", e.handleReadyz)
	mux.Handle("GET /metrics", promhttp.Handler())
	mux.HandleFunc("GET /v1/status", e.handleStatus)
	mux.HandleFunc("GET /v1/ticket-key", e.memberOrAdmin(e.handleTicketKey))
	mux.HandleFunc("POST /v1/join", e.memberOrAdmin(e.handleJoin))
	mux.HandleFunc("POST /v1/remove", e.memberOrAdmin(e.handleRemove))
	mux.HandleFunc("POST /v1/snapshot", e.memberOrAdmin(e.handleSnapshot))
	mux.HandleFunc("GET /v1/members", e.handleMembers)
	mux.HandleFunc("POST /v1/members/add", e.adminOnly(e.handleMemberAdd))
	mux.HandleFunc("POST /v1/members/promote", e.adminOnly(e.handleMemberPromote))
	mux.HandleFunc("GET /v1/hash", e.handleHash)
	mux.HandleFunc("POST /v1/hash-check", e.adminOnly(e.handleHashCheck))
	mux.HandleFunc("GET /v1/limits", e.handleGetLimits)
	mux.HandleFunc("PUT /v1/limits", e.adminOnly(e.handlePutLimits))
	mux.HandleFunc("GET /v1/snapshot/download", e.adminOnly(e.handleBackupSave))
	mux.HandleFunc("POST /v1/snapshot/restore", e.adminOnly(e.handleBackupRestore))
	e.pprofRoutes(mux)
	if cfg.Faults != nil {
		mux.HandleFunc("GET /v1/faults", e.memberOrAdmin(e.handleFaults))
		mux.HandleFunc("POST /v1/faults", e.memberOrAdmin(e.handleFaults))
		mux.HandleFunc("POST /v1/faults/storage", e.memberOrAdmin(e.handleStorageFault))
	}
	return mux
}

func (e *endpoint) handleHealthz(w http.ResponseWriter, r *http.Request) {
	if err := e.m.Alive(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

func (e *endpoint) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if err := e.m.Ready(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ready")
}

// redirectToLeader answers a leader-only request on a follower with a 307
// to the leader's admin address (clients re-send the body), or 503 when no
// leader is known. It reports whether it answered.
func (e *endpoint) redirectToLeader(w http.ResponseWriter, r *http.Request) bool {
	id, addr, elsewhere := e.m.LeaderElsewhere()
	if !elsewhere {
		return false
	}
	if addr == "" {
		writeJSON(w, http.StatusServiceUnavailable, adminapi.Reply{
			Error: "no leader with a known admin address", Code: "no_leader", LeaderID: id,
		})
		return true
	}
	w.Header().Set("Location", "https://"+addr+r.URL.RequestURI())
	writeJSON(w, http.StatusTemporaryRedirect, adminapi.Reply{
		Error: "not the leader", Code: "not_leader", LeaderID: id, LeaderHTTP: addr,
	})
	return true
}

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		badRequest(w, "bad request body: "+err.Error())
		return false
	}
	return true
}

// badRequest answers 400 with msg.
func badRequest(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusBadRequest, adminapi.Reply{Error: msg, Code: "bad_request"})
}

// writeError maps an error to a status code and JSON body.
func (e *endpoint) writeError(w http.ResponseWriter, err error) {
	reply := adminapi.Reply{Error: err.Error()}
	code := http.StatusInternalServerError
	var nl NotLeader
	errs := e.cfg.Errors
	switch {
	case errors.As(err, &nl):
		code, reply.Code = http.StatusServiceUnavailable, "not_leader"
		reply.LeaderID, reply.LeaderHTTP = nl.LeaderAdmin()
	case is(err, errs.BadRequest), errors.Is(err, namespace.ErrBadCommand):
		code, reply.Code = http.StatusBadRequest, "bad_request"
	case errors.Is(err, namespace.ErrBadVersion):
		code, reply.Code = http.StatusConflict, "bad_version"
	case errors.Is(err, namespace.ErrNoMember):
		code, reply.Code = http.StatusNotFound, "no_member"
	case is(err, errs.NotFresh):
		code, reply.Code = http.StatusConflict, "not_fresh"
	case errors.Is(err, session.ErrAdminDenied):
		code, reply.WireCode = http.StatusForbidden, uint16(session.CodeAdminDenied)
	case errors.Is(err, session.ErrMemberExists):
		code, reply.WireCode = http.StatusConflict, uint16(session.CodeMemberExists)
	case errors.Is(err, session.ErrSnapshotTooSoon):
		code, reply.WireCode = http.StatusTooManyRequests, uint16(session.CodeSnapshotTooSoon)
	case is(err, errs.Unavailable...), errors.Is(err, context.DeadlineExceeded):
		code = http.StatusServiceUnavailable
	}
	if reply.WireCode != 0 {
		reply.Code = session.Code(reply.WireCode).String()
	}
	writeJSON(w, code, reply)
}

// is reports whether err matches one of targets (nil ones match nothing).
func is(err error, targets ...error) bool {
	for _, t := range targets {
		if t != nil && errors.Is(err, t) {
			return true
		}
	}
	return false
}

// writeJSON answers v as JSON with status code, as the API does.
func writeJSON(w http.ResponseWriter, code int, v any) { apiwire.WriteJSON(w, code, v) }
