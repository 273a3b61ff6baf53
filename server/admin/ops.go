package admin

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"strconv"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/session"
)

// The operations endpoints: cluster settings, state hashes, ticket keys,
// profiles and fault injection.

// limitsReply is the body of GET and PUT /v1/limits.
type limitsReply struct {
	Revision uint64           `json:"revision"` // 0: never set through the log
	Limits   namespace.Limits `json:"limits"`
}

func (e *endpoint) handleGetLimits(w http.ResponseWriter, r *http.Request) {
	rev, l := e.m.Limits()
	writeJSON(w, http.StatusOK, limitsReply{Revision: rev, Limits: l})
}

// handlePutLimits changes the settings named in the body's "limits" and
// keeps the others. With "revision" the change applies only if the
// settings are still that revision.
func (e *endpoint) handlePutLimits(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Revision *uint64         `json:"revision"`
		Limits   json.RawMessage `json:"limits"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	if e.redirectToLeader(w, r) {
		return
	}
	if err := e.m.WaitReady(r.Context()); err != nil {
		e.writeError(w, err)
		return
	}
	rev, l := e.m.Limits()
	if req.Revision != nil {
		rev = *req.Revision
	}
	if len(req.Limits) > 0 {
		if err := json.Unmarshal(req.Limits, &l); err != nil {
			badRequest(w, "bad limits: "+err.Error())
			return
		}
	}
	index, err := e.m.SetLimits(r.Context(), l, int64(rev))
	if err != nil {
		e.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, limitsReply{Revision: index, Limits: l})
}

func (e *endpoint) handleHash(w http.ResponseWriter, r *http.Request) {
	index, err := strconv.ParseUint(r.URL.Query().Get("index"), 10, 64)
	if err != nil {
		badRequest(w, "index: "+err.Error())
		return
	}
	sum, ok := e.m.Hash(index)
	if !ok {
		writeJSON(w, http.StatusNotFound, adminapi.Reply{Error: "no state hash at that index (not applied yet, or too old)", Code: "no_hash"})
		return
	}
	writeJSON(w, http.StatusOK, adminapi.HashReply{Member: e.cfg.ID, Index: index, Hash: sum})
}

// handleHashCheck makes the leader propose a hash check now.
func (e *endpoint) handleHashCheck(w http.ResponseWriter, r *http.Request) {
	if e.redirectToLeader(w, r) {
		return
	}
	index, err := e.m.HashCheck(r.Context())
	if err != nil {
		e.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, adminapi.Reply{OK: true, Index: index})
}

// handleTicketKey answers this member's ticket key to another member.
func (e *endpoint) handleTicketKey(w http.ResponseWriter, r *http.Request, c Caller) {
	if c.Member == "" {
		e.writeError(w, fmt.Errorf("%w: only a member may ask for a ticket key; %s is not one", session.ErrAdminDenied, c))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(adminapi.TicketKey{Key: base64.StdEncoding.EncodeToString(e.m.TicketKey())})
}

// pprofRoutes adds Go's runtime profiles under /debug/pprof/, so a member
// can be profiled where it runs:
//
//	curl --cert admin.pem --key admin-key.pem --cacert ca.pem \
//		-o cpu.pb 'https://127.0.0.1:7422/debug/pprof/profile?seconds=10'
//	go tool pprof -top cpu.pb
//
// A profile shows the process's code paths and memory contents and costs
// CPU while it runs, so only admins may take one (members never need to).
func (e *endpoint) pprofRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/", e.adminOnly(pprof.Index))
	mux.HandleFunc("GET /debug/pprof/cmdline", e.adminOnly(pprof.Cmdline))
	mux.HandleFunc("GET /debug/pprof/profile", e.adminOnly(pprof.Profile))
	mux.HandleFunc("GET /debug/pprof/symbol", e.adminOnly(pprof.Symbol))
	mux.HandleFunc("GET /debug/pprof/trace", e.adminOnly(pprof.Trace))
}

// faultRequest is the body of POST /v1/faults and the answer of both
// methods.
type faultRequest struct {
	// Block lists the raft addresses this member must not exchange traffic
	// with; it replaces the previous list, and [] heals.
	Block []string `json:"block"`
}

// handleFaults serves POST /v1/faults (set the blocked raft addresses) and
// GET /v1/faults (read them). It is registered only with Config.Faults.
func (e *endpoint) handleFaults(w http.ResponseWriter, r *http.Request, _ Caller) {
	if r.Method == http.MethodPost {
		var req faultRequest
		if !decodeBody(w, r, &req) {
			return
		}
		for _, a := range req.Block {
			if _, _, err := net.SplitHostPort(a); err != nil {
				badRequest(w, fmt.Sprintf("block: %q is not host:port", a))
				return
			}
		}
		e.cfg.Faults.SetBlocked(slices.Compact(slices.Sorted(slices.Values(req.Block))))
		e.cfg.Log.Warn("fault injection: raft traffic blocked", "block", req.Block)
	}
	writeJSON(w, http.StatusOK, faultRequest{Block: e.cfg.Faults.Blocked()})
}

// storageFaultRequest is the body of POST /v1/faults/storage.
type storageFaultRequest struct {
	// Stall holds every raft log write until a request with false.
	Stall bool `json:"stall"`
}

// handleStorageFault serves POST /v1/faults/storage; registered only with
// Config.Faults.
func (e *endpoint) handleStorageFault(w http.ResponseWriter, r *http.Request, _ Caller) {
	var req storageFaultRequest
	if !decodeBody(w, r, &req) {
		return
	}
	e.cfg.Faults.HoldWrites(req.Stall)
	e.cfg.Log.Warn("fault injection: raft log writes", "stalled", req.Stall)
	writeJSON(w, http.StatusOK, req)
}
