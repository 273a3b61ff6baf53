package httpapi

// API routes for sessions, nodes and the cluster: each builds the QUIC
// front's request and runs it through the handlers (Conn.Call).

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/server/apiwire"
	"github.com/latch-io/latch/session"
)

// routeTable lists every API route. TestAPIOpenAPIRoutes checks it against
// the OpenAPI document (apispec/openapi.json).
func (a *API) routeTable() []apiRoute {
	return []apiRoute{
		{method: "GET", pattern: "/{$}", local: true, h: a.serveConsole},
		{method: "GET", pattern: "/console/{file}", local: true, h: a.serveConsole},
		{method: "GET", pattern: "/api/v1/openapi.json", local: true, h: a.serveOpenAPI},
		{method: "GET", pattern: "/api/v1/health", local: true, h: a.health},

		{method: "POST", pattern: "/api/v1/sessions", h: a.openSession},
		{method: "GET", pattern: "/api/v1/sessions", h: a.listSessions},
		{method: "POST", pattern: "/api/v1/sessions/{id}/keepalive", h: a.keepAlive},
		{method: "DELETE", pattern: "/api/v1/sessions/{id}", h: a.closeSession},

		{method: "GET", pattern: "/api/v1/nodes/{path...}", staleLocal: true, h: a.getNode},
		{method: "POST", pattern: "/api/v1/nodes/{path...}", h: a.createNode},
		{method: "PUT", pattern: "/api/v1/nodes/{path...}", h: a.setNode},
		{method: "DELETE", pattern: "/api/v1/nodes/{path...}", h: a.deleteNode},
		{method: "GET", pattern: "/api/v1/children/{path...}", staleLocal: true, h: a.children},
		{method: "GET", pattern: "/api/v1/stat/{path...}", staleLocal: true, h: a.stat},
		{method: "POST", pattern: "/api/v1/multi", h: a.multi},
		{method: "POST", pattern: "/api/v1/txn", h: a.txn}, // txn.go

		{method: "POST", pattern: "/api/v1/locks/{path...}", h: a.lockAction},
		{method: "GET", pattern: "/api/v1/locks/{path...}", h: a.lockQueue},
		{method: "GET", pattern: "/api/v1/locks", h: a.allLocks},

		{method: "POST", pattern: "/api/v1/elections/{path...}", h: a.electionAction},
		{method: "GET", pattern: "/api/v1/elections/{path...}", local: true, stream: true, h: a.electionRead},

		{method: "GET", pattern: "/api/v1/watch/{path...}", local: true, stream: true, h: a.watch},
		{method: "GET", pattern: "/api/v1/members", h: a.members},
		{method: "GET", pattern: "/api/v1/cluster", h: a.cluster},
		{method: "GET", pattern: "/api/v1/cluster/events", stream: true, h: a.clusterEvents},
		{method: "GET", pattern: "/api/v1/stats/events", local: true, stream: true, h: a.statsEvents},
	}
}

// apiPath is the namespace path named by the {path...} of r.
func apiPath(r *http.Request) string { return "/" + r.PathValue("path") }

// apiStat is a node's stat in JSON.
type apiStat struct {
	CreateRevision  uint64 `json:"create_revision"`
	ModRevision     uint64 `json:"mod_revision"`
	CreatedAt       string `json:"created_at"`
	ModifiedAt      string `json:"modified_at"`
	Version         int64  `json:"version"`
	ChildrenVersion int64  `json:"children_version"`
	EphemeralOwner  uint64 `json:"ephemeral_owner,omitempty"`
	NumChildren     int64  `json:"num_children"`
	DataLength      int32  `json:"data_length"`
}

func jsonTime(unixNano int64) string {
	if unixNano == 0 {
		return ""
	}
	return time.Unix(0, unixNano).UTC().Format(time.RFC3339Nano)
}

func toAPIStat(st namespace.Stat) *apiStat {
	return &apiStat{
		CreateRevision: st.CreateRev, ModRevision: st.ModRev, CreatedAt: jsonTime(st.Ctime), ModifiedAt: jsonTime(st.Mtime),
		Version: st.Version, ChildrenVersion: st.CVersion, EphemeralOwner: st.EphemeralOwner,
		NumChildren: st.NumChildren, DataLength: st.DataLength,
	}
}

// apiData is node data in JSON: a string when it is UTF-8, else base64.
type apiData struct {
	Data       *string `json:"data,omitempty"`
	DataBase64 *string `json:"data_base64,omitempty"`
}

func toAPIData(b []byte) apiData {
	if utf8.Valid(b) {
		s := string(b)
		return apiData{Data: &s}
	}
	s := base64.StdEncoding.EncodeToString(b)
	return apiData{DataBase64: &s}
}

func (d apiData) bytes() ([]byte, error) {
	switch {
	case d.Data != nil && d.DataBase64 != nil:
		return nil, fmt.Errorf("%w: give data or data_base64, not both", namespace.ErrBadCommand)
	case d.DataBase64 != nil:
		b, err := base64.StdEncoding.DecodeString(*d.DataBase64)
		if err != nil {
			return nil, fmt.Errorf("%w: data_base64: %v", session.ErrMalformed, err)
		}
		return b, nil
	case d.Data != nil:
		return []byte(*d.Data), nil
	}
	return nil, nil
}

// dataBody is a request body with a data field (apiData embedded).
type dataBody interface{ bytes() ([]byte, error) }

// decodeData decodes the request's JSON body into in and returns its data
// field's bytes.
func (a *API) decodeData(w http.ResponseWriter, r *http.Request, in dataBody) ([]byte, error) {
	if err := a.decodeJSON(w, r, in); err != nil {
		return nil, err
	}
	return in.bytes()
}

// versionOf is an optional expected version: AnyVersion when absent.
func versionOf(v *int64) int64 {
	if v == nil {
		return namespace.AnyVersion
	}
	return *v
}

// run is the common shape of a unary route: the session from the
// request, one call, the answer made JSON by reply.
func (a *API) run(w http.ResponseWriter, r *http.Request, c caller, req *session.Request, status int, reply func(*session.Response) any) {
	cc, sid, err := a.conn(r, c)
	if err != nil {
		apiError(w, err)
		return
	}
	if req.Session == 0 {
		req.Session = sid
	}
	resp, err := a.call(r, cc, req)
	if err != nil {
		apiError(w, err)
		return
	}
	writeJSON(w, status, reply(resp))
}

// staleParam reads ?stale=true.
func staleParam(r *http.Request) (bool, error) {
	v := r.URL.Query().Get("stale")
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: stale=%q is not a boolean", namespace.ErrBadCommand, v)
	}
	return b, nil
}

func (a *API) health(w http.ResponseWriter, r *http.Request, _ caller) {
	id, _ := a.m.Leader()
	body := map[string]any{"id": a.cfg.ID, "leader": id, "is_leader": a.m.IsLeader(), "applied": a.m.Applied()}
	if err := a.m.Ready(); err != nil {
		body["ready"], body["reason"] = false, err.Error()
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	body["ready"] = true
	writeJSON(w, http.StatusOK, body)
}

// Sessions.

type apiOpenSession struct {
	TTLMillis int64 `json:"ttl_ms"`
}

type apiSession struct {
	SessionID uint64 `json:"session_id"`
	Token     string `json:"token,omitempty"`
	TTLMillis int64  `json:"ttl_ms"`
	Revision  uint64 `json:"revision,omitempty"`
}

func (a *API) openSession(w http.ResponseWriter, r *http.Request, c caller) {
	var in apiOpenSession
	if err := a.decodeJSON(w, r, &in); err != nil {
		apiError(w, err)
		return
	}
	a.run(w, r, c, &session.Request{Type: session.MsgOpenSession, TTLMillis: in.TTLMillis}, http.StatusCreated,
		func(resp *session.Response) any {
			return apiSession{SessionID: resp.Session, Token: sessionToken(resp.Session, resp.Secret), TTLMillis: resp.TTLMillis, Revision: resp.Rev}
		})
}

// pathSession is the {id} of a session route; it must be the session of
// the request's token.
func (a *API) pathSession(r *http.Request) (uint64, error) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("%w: %q is not a session id", namespace.ErrBadCommand, r.PathValue("id"))
	}
	if r.Header.Get(hdrSession) == "" {
		return 0, fmt.Errorf("%w: give the session's token in %s", session.ErrUnknownSession, hdrSession)
	}
	return id, nil
}

func (a *API) keepAlive(w http.ResponseWriter, r *http.Request, c caller) {
	id, err := a.pathSession(r)
	if err != nil {
		apiError(w, err)
		return
	}
	a.run(w, r, c, &session.Request{Type: session.MsgKeepAlive, Session: id}, http.StatusOK,
		func(resp *session.Response) any { return apiSession{SessionID: id, TTLMillis: resp.TTLMillis} })
}

func (a *API) closeSession(w http.ResponseWriter, r *http.Request, c caller) {
	id, err := a.pathSession(r)
	if err != nil {
		apiError(w, err)
		return
	}
	a.run(w, r, c, &session.Request{Type: session.MsgCloseSession, Session: id}, http.StatusOK,
		func(resp *session.Response) any { return map[string]any{"closed": true, "revision": resp.Rev} })
}

type apiSessionInfo struct {
	ID          uint64 `json:"id"`
	Identity    string `json:"identity"`
	TTLMillis   int64  `json:"ttl_ms"`
	ExpiresInMs int64  `json:"expires_in_ms"`
	OpenRev     uint64 `json:"open_revision"`
	OpenedAt    string `json:"opened_at"`
	State       string `json:"state"`
}

func (a *API) listSessions(w http.ResponseWriter, r *http.Request, c caller) {
	a.run(w, r, c, &session.Request{Type: session.MsgSessions}, http.StatusOK, func(resp *session.Response) any {
		return map[string]any{"sessions": apiSessions(resp.Sessions), "more": resp.More, "revision": resp.Rev}
	})
}

func apiSessions(in []session.SessionInfo) []apiSessionInfo {
	out := make([]apiSessionInfo, 0, len(in))
	for _, si := range in {
		state := "alive"
		switch {
		case si.ExpiresInMillis <= 0:
			state = "expiring"
		case si.ExpiresInMillis < si.TTLMillis/3:
			state = "jeopardy" // no keepalive for two thirds of the TTL
		}
		out = append(out, apiSessionInfo{
			ID: si.ID, Identity: si.Identity, TTLMillis: si.TTLMillis, ExpiresInMs: si.ExpiresInMillis,
			OpenRev: si.OpenRev, OpenedAt: jsonTime(si.OpenTime), State: state,
		})
	}
	return out
}

// Nodes.

type apiNode struct {
	Path string `json:"path"`
	apiData
	Stat     *apiStat `json:"stat,omitempty"`
	Revision uint64   `json:"revision"`
}

func (a *API) getNode(w http.ResponseWriter, r *http.Request, c caller) {
	stale, err := staleParam(r)
	if err != nil {
		apiError(w, err)
		return
	}
	p := apiPath(r)
	a.run(w, r, c, &session.Request{Type: session.MsgGet, Path: p, Stale: stale}, http.StatusOK, func(resp *session.Response) any {
		return apiNode{Path: p, apiData: toAPIData(resp.Data), Stat: toAPIStat(resp.Stat), Revision: resp.Rev}
	})
}

type apiCreate struct {
	apiData
	Ephemeral  bool `json:"ephemeral"`
	Sequential bool `json:"sequential"`
}

func (a *API) createNode(w http.ResponseWriter, r *http.Request, c caller) {
	var in apiCreate
	data, err := a.decodeData(w, r, &in)
	if err != nil {
		apiError(w, err)
		return
	}
	var flags namespace.CreateFlags
	if in.Ephemeral {
		flags |= namespace.FlagEphemeral
	}
	if in.Sequential {
		flags |= namespace.FlagSequential
	}
	a.run(w, r, c, &session.Request{Type: session.MsgCreate, Path: apiPath(r), Data: data, Flags: flags}, http.StatusCreated,
		func(resp *session.Response) any {
			return apiNode{Path: resp.Path, Stat: toAPIStat(resp.Stat), Revision: resp.Rev}
		})
}

type apiSet struct {
	apiData
	Version *int64 `json:"version"`
}

func (a *API) setNode(w http.ResponseWriter, r *http.Request, c caller) {
	var in apiSet
	data, err := a.decodeData(w, r, &in)
	if err != nil {
		apiError(w, err)
		return
	}
	p := apiPath(r)
	a.run(w, r, c, &session.Request{Type: session.MsgSet, Path: p, Data: data, Version: versionOf(in.Version)}, http.StatusOK,
		func(resp *session.Response) any {
			return apiNode{Path: p, Stat: toAPIStat(resp.Stat), Revision: resp.Rev}
		})
}

func (a *API) deleteNode(w http.ResponseWriter, r *http.Request, c caller) {
	version := namespace.AnyVersion
	if v := r.URL.Query().Get("version"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			apiError(w, fmt.Errorf("%w: version=%q is not a number", namespace.ErrBadCommand, v))
			return
		}
		version = n
	}
	p := apiPath(r)
	a.run(w, r, c, &session.Request{Type: session.MsgDelete, Path: p, Version: version}, http.StatusOK,
		func(resp *session.Response) any {
			return map[string]any{"path": p, "deleted": true, "revision": resp.Rev}
		})
}

func (a *API) children(w http.ResponseWriter, r *http.Request, c caller) {
	q := r.URL.Query()
	stale, err := staleParam(r)
	if err != nil {
		apiError(w, err)
		return
	}
	var limit int64
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.ParseInt(v, 10, 32); err != nil || limit < 0 {
			apiError(w, fmt.Errorf("%w: limit=%q is not a non-negative number", namespace.ErrBadCommand, v))
			return
		}
	}
	p := apiPath(r)
	a.run(w, r, c, &session.Request{Type: session.MsgChildren, Path: p, After: q.Get("after"), Limit: int32(limit), Stale: stale}, http.StatusOK,
		func(resp *session.Response) any {
			out := map[string]any{"path": p, "children": nonNil(resp.Names), "more": resp.More, "revision": resp.Rev}
			if resp.More && len(resp.Names) > 0 {
				out["next_after"] = resp.Names[len(resp.Names)-1]
			}
			return out
		})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (a *API) stat(w http.ResponseWriter, r *http.Request, c caller) {
	stale, err := staleParam(r)
	if err != nil {
		apiError(w, err)
		return
	}
	p := apiPath(r)
	a.run(w, r, c, &session.Request{Type: session.MsgStat, Path: p, Stale: stale}, http.StatusOK, func(resp *session.Response) any {
		return apiNode{Path: p, Stat: toAPIStat(resp.Stat), Revision: resp.Rev}
	})
}

type apiOp struct {
	Op   string `json:"op"` // create, set, delete, check
	Path string `json:"path"`
	apiData
	Version    *int64 `json:"version"`
	Ephemeral  bool   `json:"ephemeral"`
	Sequential bool   `json:"sequential"`
}

type apiOpResult struct {
	Path    string       `json:"path,omitempty"`
	Stat    *apiStat     `json:"stat,omitempty"`
	Code    session.Code `json:"code,omitempty"`
	Name    string       `json:"name,omitempty"`
	Message string       `json:"message,omitempty"`
}

var apiOpTypes = map[string]namespace.Op{
	"create": namespace.OpCreate, "set": namespace.OpSet, "delete": namespace.OpDelete, "check": namespace.OpCheck,
}

func (a *API) multi(w http.ResponseWriter, r *http.Request, c caller) {
	var in struct {
		Ops []apiOp `json:"ops"`
	}
	if err := a.decodeJSON(w, r, &in); err != nil {
		apiError(w, err)
		return
	}
	ops, err := apiSessionOps(in.Ops, "multi", false)
	if err != nil {
		apiError(w, err)
		return
	}
	req := &session.Request{Type: session.MsgMulti, Ops: ops}
	cc, sid, err := a.conn(r, c)
	if err != nil {
		apiError(w, err)
		return
	}
	req.Session = sid
	resp, err := a.call(r, cc, req)
	if resp == nil || len(resp.Results) == 0 {
		if err != nil {
			apiError(w, err)
			return
		}
	}
	results := make([]apiOpResult, len(resp.Results))
	for i, res := range resp.Results {
		results[i] = apiResultOf(res)
	}
	if err != nil {
		// All or nothing: nothing was applied; the results say which op
		// failed.
		code := session.CodeOf(err)
		writeJSON(w, apiwire.Status(code), map[string]any{
			"code": code, "name": code.String(), "message": err.Error(), "results": results,
		})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"revision": resp.Rev, "results": results})
}

// Members.

type apiMember struct {
	ID         string `json:"id"`
	RaftAddr   string `json:"raft_addr"`
	ClientAddr string `json:"client_addr"`
	HTTPAddr   string `json:"http_addr"`
	APIAddr    string `json:"api_addr"`
	Voter      bool   `json:"voter"`
	Leader     bool   `json:"leader"`
}

func (a *API) members(w http.ResponseWriter, r *http.Request, c caller) {
	ms, err := a.m.Members()
	if err != nil {
		apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"members": apiMembers(ms)})
}

func apiMembers(ms []adminapi.MemberStatus) []apiMember {
	out := make([]apiMember, 0, len(ms))
	for _, m := range ms {
		out = append(out, apiMember{
			ID: m.ID, RaftAddr: m.RaftAddr, ClientAddr: m.ClientAddr, HTTPAddr: m.HTTPAddr, APIAddr: m.APIAddr,
			Voter: m.Suffrage == "voter", Leader: m.Leader,
		})
	}
	return out
}
