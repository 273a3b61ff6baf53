package httpapi

// The web console (package console: static files, plain JS, no build
// step), the OpenAPI document (package apispec), and the
// cluster view the console shows: members with health, sessions and
// every lock queue, as one JSON document and as an event stream that
// sends it again whenever it changed.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/server/apispec"
	"github.com/latch-io/latch/server/console"
	"github.com/latch-io/latch/session"
)

func (a *API) serveConsole(w http.ResponseWriter, r *http.Request, _ caller) {
	b, ct, ok := console.File(r.PathValue("file"))
	if !ok {
		apiError(w, session.ErrNoRoute)
		return
	}
	if ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(b)
}

func (a *API) serveOpenAPI(w http.ResponseWriter, _ *http.Request, _ caller) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(apispec.Document)
}

// apiCluster is the console's view of the cluster, read on the leader.
type apiCluster struct {
	Member   string           `json:"member"` // the member that answered
	Leader   string           `json:"leader"`
	Revision uint64           `json:"revision"`
	Members  []apiMemberState `json:"members"`
	Sessions []apiSessionInfo `json:"sessions"`
	More     bool             `json:"more_sessions,omitempty"`
	Locks    []apiQueue       `json:"locks"`
}

type apiMemberState struct {
	apiMember
	Healthy bool   `json:"healthy"`
	Ready   bool   `json:"ready"`
	Applied uint64 `json:"applied"`
	Error   string `json:"error,omitempty"`
}

func (a *API) cluster(w http.ResponseWriter, r *http.Request, c caller) {
	view, err := a.clusterView(r, c)
	if err != nil {
		apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, view)
}

func (a *API) clusterView(r *http.Request, c caller) (*apiCluster, error) {
	cc, _, err := a.conn(r, c)
	if err != nil {
		return nil, err
	}
	resp, err := a.call(r, cc, &session.Request{Type: session.MsgSessions})
	if err != nil {
		return nil, err
	}
	ms, err := a.m.Members()
	if err != nil {
		return nil, err
	}
	locks, _, err := a.lockQueues(c.identity)
	if err != nil {
		return nil, err
	}
	lid, _ := a.m.Leader()
	view := &apiCluster{
		Member: a.cfg.ID, Leader: lid, Revision: resp.Rev,
		Sessions: apiSessions(resp.Sessions), More: resp.More, Locks: locks,
	}
	health := a.probeMembers(r.Context(), ms)
	for _, m := range apiMembers(ms) {
		view.Members = append(view.Members, apiMemberState{apiMember: m, Healthy: health[m.ID].Healthy,
			Ready: health[m.ID].Ready, Applied: health[m.ID].Applied, Error: health[m.ID].Error})
	}
	return view, nil
}

// memberHealth is what GET /api/v1/health of a member said.
type memberHealth struct {
	Healthy bool
	Ready   bool   `json:"ready"`
	Applied uint64 `json:"applied"`
	Error   string
}

// probeTimeout bounds one health probe of a member.
const probeTimeout = 500 * time.Millisecond

// probeMembers asks every member's API for its health, at once.
func (a *API) probeMembers(ctx context.Context, ms []adminapi.MemberStatus) map[string]memberHealth {
	out := make(map[string]memberHealth, len(ms))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := a.probe(ctx, m)
			mu.Lock()
			out[m.ID] = h
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

func (a *API) probe(ctx context.Context, m adminapi.MemberStatus) memberHealth {
	if m.ID == a.cfg.ID {
		err := a.m.Ready()
		h := memberHealth{Healthy: true, Ready: err == nil, Applied: a.m.Applied()}
		if err != nil {
			h.Error = err.Error()
		}
		return h
	}
	if m.APIAddr == "" {
		return memberHealth{Error: "no api address recorded"}
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+m.APIAddr+"/api/v1/health", nil)
	if err != nil {
		return memberHealth{Error: err.Error()}
	}
	resp, err := a.fwd.Do(req)
	if err != nil {
		return memberHealth{Error: err.Error()}
	}
	defer resp.Body.Close()
	var h memberHealth
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return memberHealth{Error: err.Error()}
	}
	h.Healthy = true
	if !h.Ready {
		h.Error = "not ready"
	}
	return h
}

// clusterPoll is how often the cluster stream looks for a change.
const clusterPoll = 250 * time.Millisecond

// clusterEvents streams the cluster view: a cluster message now and
// whenever it changed.
func (a *API) clusterEvents(w http.ResponseWriter, r *http.Request, c caller) {
	release, err := a.watchSlot(c.identity)
	if err != nil {
		apiError(w, err)
		return
	}
	defer release()
	view, err := a.clusterView(r, c)
	if err != nil {
		apiError(w, err)
		return
	}
	out, err := startSSE(w)
	if err != nil {
		return
	}
	tick := time.NewTicker(clusterPoll)
	defer tick.Stop()
	var last []byte
	for {
		if view != nil {
			b, _ := json.Marshal(view)
			if !bytes.Equal(b, last) {
				if out.event("", "cluster", json.RawMessage(b), true) != nil {
					return
				}
				last = b
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
		if !a.m.IsLeader() {
			// Leadership moved: end; the console reconnects and is
			// forwarded to the new leader.
			return
		}
		view, _ = a.clusterView(r, c)
	}
}
