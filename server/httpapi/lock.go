package httpapi

// API routes for locks and elections. Acquire is the lock service's one
// acquisition engine (package server/locksvc, through Locks) as a long
// poll: the answer comes when the request is granted, or the wait ends
// (wait_timeout_ms; the request is withdrawn and acquired is false), or
// the client goes away (withdrawn). A granted lock stays held by its session after the
// answer; release, renew and the queue name it by fencing token (or
// request node), which resolves to the request node the QUIC front's
// release and renew handlers take.
//
// An implicit lease (client_id + ttl_ms, no session) is a session of
// its own: the acquire answer's lease_token is that session's token, and
// renew and release need it (ErrBadSecret without it), so what the queue
// shows (client_id, fencing_token) cannot take the lock over. The secret
// went through the log with the session's open, so a renewal after a
// leader change is checked as before it.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// maxAPIWait bounds wait_timeout_ms: a long poll ends after at most this.
const maxAPIWait = 5 * time.Minute

// apiLockBody is the body of acquire, release, renew and the election
// calls; each reads the fields it needs.
type apiLockBody struct {
	ClientID          string `json:"client_id"`
	TTLMillis         int64  `json:"ttl_ms"`
	WaitTimeoutMillis int64  `json:"wait_timeout_ms"`
	Mode              string `json:"mode"`
	LockDelayMillis   int64  `json:"lock_delay_ms"`
	FencingToken      uint64 `json:"fencing_token"`
	LeaseToken        string `json:"lease_token"`
	Term              uint64 `json:"term"`
	Node              string `json:"node"`
	apiData
}

// apiLock is one request of a lock queue.
type apiLock struct {
	Node            string `json:"node,omitempty"`
	Path            string `json:"path"`
	Mode            string `json:"mode"`
	Session         uint64 `json:"session_id"`
	Revision        uint64 `json:"revision"`
	Granted         bool   `json:"granted"`
	FencingToken    uint64 `json:"fencing_token,omitempty"`
	GrantedAt       string `json:"granted_at,omitempty"`
	ExpiresAt       string `json:"expires_at,omitempty"`
	HoldTTLMillis   int64  `json:"ttl_ms,omitempty"`
	LockDelayMillis int64  `json:"lock_delay_ms"`
	// LockDelay: the holder was lost and the lock stays unavailable until
	// DelayEndsAt.
	LockDelay   bool   `json:"lock_delay,omitempty"`
	DelayEndsAt string `json:"delay_ends_at,omitempty"`
	ClientID    string `json:"client_id,omitempty"` // the request node's data (a value, for elections)
}

func modeName(m session.LockMode) string {
	if m == session.LockShared {
		return "shared"
	}
	return "exclusive"
}

func parseMode(s string) (session.LockMode, error) {
	switch s {
	case "", "exclusive":
		return session.LockExclusive, nil
	case "shared":
		return session.LockShared, nil
	}
	return 0, fmt.Errorf("%w: mode %q is not exclusive or shared", namespace.ErrBadCommand, s)
}

// splitAction cuts the last segment of {path...}: "a/b/acquire" is the
// action acquire on /a/b.
func splitAction(r *http.Request, actions ...string) (path, action string, err error) {
	rest := r.PathValue("path")
	i := strings.LastIndexByte(rest, '/')
	action = rest[i+1:]
	for _, a := range actions {
		if a == action {
			if i < 0 {
				return "/", action, nil
			}
			return "/" + rest[:i], action, nil
		}
	}
	return "", "", fmt.Errorf("%w: %s %s: the last segment is not one of %s", session.ErrNoRoute, r.Method, r.URL.Path, strings.Join(actions, ", "))
}

func (a *API) lockAction(w http.ResponseWriter, r *http.Request, c caller) {
	path, action, err := splitAction(r, "acquire", "release", "renew")
	if err != nil {
		apiError(w, err)
		return
	}
	var in apiLockBody
	if err := a.decodeJSON(w, r, &in); err != nil {
		apiError(w, err)
		return
	}
	switch action {
	case "acquire":
		mode, err := parseMode(in.Mode)
		if err != nil {
			apiError(w, err)
			return
		}
		data, err := in.bytes()
		if err != nil {
			apiError(w, err)
			return
		}
		if data == nil && in.ClientID != "" {
			data = []byte(in.ClientID) // the queue shows who holds it
		}
		a.acquire(w, r, c, path, mode, data, in, false)
	case "release":
		a.release(w, r, c, path, in, false)
	case "renew":
		a.renew(w, r, c, path, in)
	}
}

// acquire requests the lock on path for the request's session (or an
// implicit lease), waits as the body says and answers with the grant.
func (a *API) acquire(w http.ResponseWriter, r *http.Request, c caller, path string, mode session.LockMode, data []byte, in apiLockBody, election bool) {
	cc, sid, err := a.conn(r, c)
	if err != nil {
		apiError(w, err)
		return
	}
	wait := time.Duration(in.WaitTimeoutMillis) * time.Millisecond
	switch {
	case in.WaitTimeoutMillis < 0:
		apiError(w, fmt.Errorf("%w: wait_timeout_ms %d is negative", namespace.ErrBadCommand, in.WaitTimeoutMillis))
		return
	case wait > maxAPIWait:
		apiError(w, fmt.Errorf("%w: wait_timeout_ms %d is over %d", namespace.ErrBadCommand, in.WaitTimeoutMillis, maxAPIWait.Milliseconds()))
		return
	case in.TTLMillis < 0 || in.LockDelayMillis < 0:
		apiError(w, fmt.Errorf("%w: ttl_ms and lock_delay_ms must not be negative", namespace.ErrBadCommand))
		return
	}
	implicit := sid == 0
	var leaseToken string // an implicit lease's: renew and release need it
	if implicit {
		if election || in.ClientID == "" || in.TTLMillis == 0 {
			hint := "client_id and ttl_ms for an implicit lease"
			if election {
				hint = "a campaign needs a session"
			}
			apiError(w, fmt.Errorf("%w: give a session token in %s, or %s", session.ErrUnknownSession, hdrSession, hint))
			return
		}
		resp, err := a.call(r, cc, &session.Request{Type: session.MsgOpenSession, TTLMillis: in.TTLMillis})
		if err != nil {
			apiError(w, err)
			return
		}
		sid = resp.Session
		leaseToken = sessionToken(sid, resp.Secret)
		defer a.keepWaiting(sid)() // leasewait.go
	}
	// giveUp ends an implicit lease that holds nothing.
	giveUp := func() {
		if implicit {
			ctx, cancel := context.WithTimeout(a.cfg.Context, a.cfg.ApplyTimeout)
			defer cancel()
			_, _ = cc.Call(ctx, &session.Request{Type: session.MsgCloseSession, Session: sid})
		}
	}
	o, err := a.m.Acquire(r.Context(), LockRequest{
		Path: path, Mode: mode, Session: sid, Identity: c.identity, Data: data,
		HoldTTL: in.TTLMillis, LockDelay: in.LockDelayMillis, Try: wait == 0, Wait: wait,
	})
	if o.Granted {
		a.granted(w, o.Node, o.Token, sid, o.Rev, election, leaseToken)
		return
	}
	giveUp()
	key := "acquired"
	if election {
		key = "leader"
	}
	switch {
	case o.Ended:
		// The caller gave up: its request was withdrawn.
	case wait == 0 && errors.Is(err, session.ErrLocked):
		// Decided inside Apply: nothing was queued.
		writeJSON(w, http.StatusOK, map[string]any{key: false, "message": err.Error()})
	case o.Node != "" && errors.Is(err, session.ErrTimeout):
		writeJSON(w, http.StatusOK, map[string]any{
			key: false, "node": o.Node, "revision": o.Rev,
			"message": fmt.Sprintf("not granted within %dms; request withdrawn", in.WaitTimeoutMillis),
		})
	default:
		apiError(w, err)
	}
}

// granted answers a grant.
func (a *API) granted(w http.ResponseWriter, node string, token, sid, rev uint64, election bool, leaseToken string) {
	out := map[string]any{"acquired": true, "fencing_token": token, "node": node, "session_id": sid, "revision": rev}
	if election {
		out = map[string]any{"leader": true, "term": token, "node": node, "session_id": sid, "revision": rev}
	}
	if leaseToken != "" {
		out["lease_token"] = leaseToken
	}
	a.lockEnd(out, "expires_at", node, sid)
	writeJSON(w, http.StatusOK, out)
}

// lockEnd says when the lock node ends unless renewed, into out[key]:
// the earlier of its hold deadline and its session's lease end (keepalives
// and renewals move that), and which one it is (expires_with "hold_ttl"
// or "session"). An implicit lease whose ttl_ms is above the session
// bounds ends with its session first.
func (a *API) lockEnd(out map[string]any, key, node string, sid uint64) {
	var end time.Time
	with := ""
	if info, err := a.m.Lock(node); err == nil && info.Deadline != 0 {
		end, with = time.Unix(0, info.Deadline), "hold_ttl"
		out["ttl_ms"] = info.HoldTTLMillis
	}
	if left := a.m.ExpiresIn(sid); left > 0 {
		if s := time.Now().Add(left); with == "" || s.Before(end) {
			end, with = s, "session"
		}
	}
	if with != "" {
		out[key], out["expires_with"] = end.UTC().Format(time.RFC3339Nano), with
	}
}

// heldBy finds the request path's lock the body names (node, or
// fencing_token / term among the granted) and checks that the caller may
// act for it: its session is the request's, or, without a session, the
// body's lease_token is the token of the request's implicit lease (its
// session's secret, checked as a resume checks it, identity included)
// and client_id, when given, the request's data. It returns a connection
// with the lock's session attached, and whether the lease token named it.
func (a *API) heldBy(r *http.Request, c caller, path string, in apiLockBody) (namespace.LockInfo, Conn, bool, error) {
	info, cc, err := a.findHeld(r, c, path, in)
	return info, cc, err == nil && r.Header.Get(hdrSession) == "", err
}

// findHeld is heldBy's search and checks.
func (a *API) findHeld(r *http.Request, c caller, path string, in apiLockBody) (namespace.LockInfo, Conn, error) {
	cc, sid, err := a.conn(r, c)
	if err != nil {
		return namespace.LockInfo{}, nil, err
	}
	token := in.FencingToken
	if token == 0 {
		token = in.Term
	}
	var info namespace.LockInfo
	switch {
	case in.Node != "":
		if info, err = a.m.Lock(in.Node); err != nil {
			return info, nil, err
		}
		if info.Path != path {
			return info, nil, fmt.Errorf("%w: %s is a request on %s, not %s", namespace.ErrBadCommand, in.Node, info.Path, path)
		}
	case token != 0:
		q, err := a.m.LockQueue(path)
		if err != nil {
			return info, nil, err
		}
		found := false
		for _, li := range q {
			if li.Granted && !li.Phantom && li.Token == token {
				info, found = li, true
				break
			}
		}
		if !found {
			return info, nil, fmt.Errorf("%w: no lock on %s holds fencing token %d", session.ErrNotHeld, path, token)
		}
	default:
		return info, nil, fmt.Errorf("%w: name the lock by fencing_token (or term, or node)", namespace.ErrBadCommand)
	}
	if sid != 0 {
		if info.Session != sid {
			return info, nil, fmt.Errorf("%w: %s belongs to another session", session.ErrNotHeld, info.Node)
		}
		return info, cc, nil
	}
	if in.LeaseToken == "" {
		return info, nil, fmt.Errorf("%w: give the lease_token the acquire answered (or a session token in %s); client_id and fencing_token alone do not prove you hold %s",
			session.ErrUnknownSession, hdrSession, info.Node)
	}
	id, secret, err := parseSessionToken(in.LeaseToken)
	if err == nil && id != info.Session {
		err = errors.New("another lease's token")
	}
	if err == nil {
		err = a.checkSecret(id, secret, c.identity)
	}
	if err != nil {
		return info, nil, fmt.Errorf("%w: lease_token is not the token of the lease that holds %s", session.ErrBadSecret, info.Node)
	}
	if in.ClientID != "" {
		data, _, err := a.m.Get(info.Node)
		if err != nil {
			return info, nil, err
		}
		if string(data) != in.ClientID {
			return info, nil, fmt.Errorf("%w: %s is not held by client_id %q", session.ErrNotHeld, info.Node, in.ClientID)
		}
	}
	cc.Attach(info.Session)
	return info, cc, nil
}

// release withdraws the named request (held or waiting). Named by its
// lease token, the implicit lease is closed with it, whichever leader
// opened it.
func (a *API) release(w http.ResponseWriter, r *http.Request, c caller, path string, in apiLockBody, election bool) {
	info, cc, byLease, err := a.heldBy(r, c, path, in)
	if err != nil {
		if election && errors.Is(err, session.ErrNotHeld) {
			writeJSON(w, http.StatusOK, map[string]any{"resigned": false}) // not leading either way
			return
		}
		apiError(w, err)
		return
	}
	req := &session.Request{Type: session.MsgLockRelease, Node: info.Node, Session: info.Session}
	if byLease {
		// The implicit lease holds only this lock: closing it releases
		// the lock and ends the lease in one command.
		req = &session.Request{Type: session.MsgCloseSession, Session: info.Session}
	}
	resp, err := a.call(r, cc, req)
	if err != nil {
		apiError(w, err)
		return
	}
	key := "released"
	if election {
		key = "resigned"
	}
	writeJSON(w, http.StatusOK, map[string]any{key: true, "revision": resp.Rev})
}

// renew restarts the lock's hold TTL and renews its session's lease.
// ttl_ms, when given, becomes the hold TTL, and for an implicit lease the
// session's TTL too (clamped into the session bounds), in one command.
func (a *API) renew(w http.ResponseWriter, r *http.Request, c caller, path string, in apiLockBody) {
	info, cc, byLease, err := a.heldBy(r, c, path, in)
	if err != nil {
		apiError(w, err)
		return
	}
	if in.TTLMillis < 0 {
		apiError(w, fmt.Errorf("%w: ttl_ms %d is negative", namespace.ErrBadCommand, in.TTLMillis))
		return
	}
	if _, err := a.call(r, cc, &session.Request{Type: session.MsgKeepAlive, Session: info.Session}); err != nil {
		apiError(w, err)
		return
	}
	req := &session.Request{Type: session.MsgLockRenew, Node: info.Node, Session: info.Session, HoldTTLMillis: in.TTLMillis}
	if byLease {
		req.TTLMillis = in.TTLMillis
	}
	resp, err := a.call(r, cc, req)
	if err != nil {
		apiError(w, err)
		return
	}
	out := map[string]any{"renewed": true, "fencing_token": info.Token, "node": info.Node, "revision": resp.Rev}
	a.lockEnd(out, "new_expires_at", info.Node, info.Session)
	writeJSON(w, http.StatusOK, out)
}
