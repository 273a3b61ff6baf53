package httpapi

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// apiLockEvent is one lock history record as the HTTP API shows it.
type apiLockEvent struct {
	Seq          uint64 `json:"seq"`
	Revision     uint64 `json:"rev"`
	Event        string `json:"event"`
	Path         string `json:"path"`
	Node         string `json:"node"`
	Mode         string `json:"mode"`
	FencingToken uint64 `json:"token"`
	Session      uint64 `json:"session"`
	Identity     string `json:"identity,omitempty"`
	By           string `json:"by,omitempty"`
	Time         string `json:"time"`
	GrantedAt    string `json:"grant_time"`
}

// lockHistory answers GET /api/v1/locks/{path}/history[?recursive=true&limit=N]
// through the QUIC front's MsgLockHistory (Server.LockHistory).
func (a *API) lockHistory(w http.ResponseWriter, r *http.Request, c caller, path string) {
	req := &session.Request{Type: session.MsgLockHistory, Path: path}
	q := r.URL.Query()
	if v := q.Get("recursive"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			apiError(w, fmt.Errorf("%w: recursive=%q: want true or false", namespace.ErrBadCommand, v))
			return
		}
		req.Recursive = b
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			apiError(w, fmt.Errorf("%w: limit=%q: want a count", namespace.ErrBadCommand, v))
			return
		}
		req.Limit = int32(n)
	}
	cc, _, err := a.conn(r, c)
	if err != nil {
		apiError(w, err)
		return
	}
	resp, err := a.call(r, cc, req)
	if err != nil {
		apiError(w, err)
		return
	}
	out := make([]apiLockEvent, 0, len(resp.LockHistory))
	for _, ev := range resp.LockHistory {
		out = append(out, apiLockEvent{
			Seq: ev.Seq, Revision: ev.Rev, Event: ev.Event, Path: ev.Path, Node: ev.Node, Mode: ev.Mode.String(),
			FencingToken: ev.Token, Session: ev.Session, Identity: ev.Identity, By: ev.By,
			Time: jsonTime(ev.Time), GrantedAt: jsonTime(ev.GrantTime),
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": path, "history": out, "revision": resp.Rev})
}
