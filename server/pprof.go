package server

import (
	"net/http"
	"net/http/pprof"
)

// handlePprof adds Go's runtime profiles under /debug/pprof/ to the admin
// mux, so a member can be profiled where it runs:
//
//	curl --cert admin.pem --key admin-key.pem --cacert ca.pem \
//		-o cpu.pb 'https://127.0.0.1:7422/debug/pprof/profile?seconds=10'
//	go tool pprof -top cpu.pb
//
// A profile shows the process's code paths and memory contents and costs
// CPU while it runs, so only admins may take one (members never need to).
func (s *Server) handlePprof(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/", s.adminOnly(pprof.Index))
	mux.HandleFunc("GET /debug/pprof/cmdline", s.adminOnly(pprof.Cmdline))
	mux.HandleFunc("GET /debug/pprof/profile", s.adminOnly(pprof.Profile))
	mux.HandleFunc("GET /debug/pprof/symbol", s.adminOnly(pprof.Symbol))
	mux.HandleFunc("GET /debug/pprof/trace", s.adminOnly(pprof.Trace))
}
