// Package apiwire is the HTTP API's vocabulary, shared by the fronts that
// serve it: a member's API (package server) and the gateway in front of
// several cells (latch gateway, cmd/latch). It holds the headers, the
// error shape and the status of each wire code, the JSON writer, and the
// browser guard (guard.go). It imports no server internals, so the CLI
// links the words of the API without the member that serves it.
package apiwire

import (
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"time"

	"github.com/latch-io/latch/session"
)

// Headers of the API.
const (
	// HeaderSession carries a session token "<id>.<secret hex>".
	HeaderSession = "Latch-Session"
	// HeaderIdentity carries the caller's identity on a request a gateway
	// or a forwarding member sends on; members believe it only from those
	// peers.
	HeaderIdentity = "Latch-Identity"
	// HeaderRetry on a 503 says the request was not acted on: the
	// forwarding member or gateway may send it to the leader again.
	HeaderRetry = "Latch-Retry"
)

// ErrorBody is the JSON body of every API error.
type ErrorBody struct {
	Code    session.Code `json:"code"`
	Name    string       `json:"name"`
	Message string       `json:"message"`
}

// WriteError answers err with its wire code and the HTTP status of the
// code. A refusal that was not acted on (no leader, not the leader) also
// carries HeaderRetry, so a forwarding front may retry elsewhere.
func WriteError(w http.ResponseWriter, err error) {
	code := session.CodeOf(err)
	if code == session.CodeNotLeader || code == session.CodeNoLeader {
		if w.Header().Get(HeaderRetry) == "" {
			w.Header().Set(HeaderRetry, "leader")
		}
	}
	WriteJSON(w, Status(code), ErrorBody{Code: code, Name: code.String(), Message: err.Error()})
}

// WriteJSON answers v as indented JSON with status code.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// Status is the HTTP status of a wire code.
func Status(c session.Code) int {
	switch c {
	case session.CodeNoNode, session.CodeNoMember, session.CodeNoRoute, session.CodeNoElectionLeader:
		return http.StatusNotFound
	case session.CodeNodeExists, session.CodeBadVersion, session.CodeNotEmpty,
		session.CodeWouldDeadlock, session.CodeNotHeld, session.CodeLocked:
		return http.StatusConflict
	case session.CodeBadPath, session.CodeEphemeralParent, session.CodeTooManyOps, session.CodeRootImmutable,
		session.CodeBadCommand, session.CodeMalformed, session.CodeUnknownType, session.CodeVersion:
		return http.StatusBadRequest
	case session.CodeDataTooLarge, session.CodeFrameTooLarge:
		return http.StatusRequestEntityTooLarge
	case session.CodeNoSession, session.CodeSessionExpired:
		return http.StatusGone
	case session.CodeUnknownSession, session.CodeBadSecret:
		return http.StatusUnauthorized
	case session.CodePermissionDenied:
		return http.StatusForbidden
	case session.CodeReservedName:
		return http.StatusBadRequest
	case session.CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case session.CodeWrongCell:
		return http.StatusMisdirectedRequest
	case session.CodeTooManyWatches, session.CodeTooManySessions, session.CodeBusy:
		return http.StatusTooManyRequests
	case session.CodeTimeout:
		return http.StatusGatewayTimeout
	case session.CodeCanceled:
		return http.StatusRequestTimeout
	case session.CodeNotLeader, session.CodeNoLeader, session.CodeClosed, session.CodeUnknownOutcome, session.CodeBehind:
		return http.StatusServiceUnavailable
	case session.CodeInternal:
		return http.StatusInternalServerError
	}
	// Codes this front does not know yet (later workstreams' refusals)
	// are the client's to fix.
	return http.StatusBadRequest
}

// ForwardClient is the HTTP client a front (a member, the gateway) sends
// API requests on to a member with, over TLS conf: dials bounded to a
// second, HTTP/2 over TLS, idle connections kept a minute.
func ForwardClient(conf *tls.Config) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
		TLSClientConfig:     conf,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     time.Minute,
	}}
}
