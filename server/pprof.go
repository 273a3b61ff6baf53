package server

import (
	"net/http"
	"net/http/pprof"
)

// handlePprof adds Go's runtime profiles under /debug/pprof/ to the admin
// mux, so a member can be profiled where it runs:
//
//	go tool pprof http://127.0.0.1:7422/debug/pprof/profile?seconds=10
//
// A profile shows code paths and memory contents of the process, so the
// routes sit on the admin endpoint with the other operator-only routes.
func handlePprof(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}
