package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/latch-io/latch/server/apiwire"
	"github.com/latch-io/latch/session"
)

// The views of GET /api/v1/cluster, /api/v1/locks and /api/v1/members
// (and the console's cluster stream) without ?cell=: every cell's, merged.

// cellView is one cell's answer to a read the gateway merges.
type cellView struct {
	cell string
	body map[string]any
	err  error
}

// readCells sends GET path to every cell of the map at once.
func (g *gateway) readCells(ctx context.Context, path, identity string) []cellView {
	cells := slices.Sorted(maps.Keys(g.x.Map()))
	out := make([]cellView, len(cells))
	var wg sync.WaitGroup
	for i, cell := range cells {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, err := g.readCell(ctx, cell, path, identity)
			out[i] = cellView{cell: cell, body: body, err: err}
		}()
	}
	wg.Wait()
	return out
}

// readCell is one GET of path from cell: the first member that answers.
func (g *gateway) readCell(ctx context.Context, cell, path, identity string) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var last error = fmt.Errorf("%w: no member of cell %q answered", session.ErrNoLeader, cell)
	for attempt := 0; attempt < 2; attempt++ {
		addrs, err := g.memberAPIs(ctx, cell, attempt > 0)
		if err != nil {
			last = err
		}
		for _, addr := range addrs {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, nil)
			if err != nil {
				return nil, err
			}
			req.Header.Set(apiwire.HeaderIdentity, identity)
			resp, err := g.fwd.Do(req)
			if err != nil {
				last = err
				continue
			}
			b, err := io.ReadAll(io.LimitReader(resp.Body, 4*maxGatewayBody))
			resp.Body.Close()
			var m map[string]any
			if err == nil {
				err = json.Unmarshal(b, &m)
			}
			if err != nil || resp.StatusCode != http.StatusOK {
				last = fmt.Errorf("cell %q: %s: %d %v %s", cell, addr, resp.StatusCode, err, b)
				continue
			}
			return m, nil
		}
	}
	return nil, last
}

func (g *gateway) merged(w http.ResponseWriter, r *http.Request, path string) {
	views := g.readCells(r.Context(), path, g.callerIdentity(r))
	switch path {
	case "/api/v1/cluster":
		apiwire.WriteJSON(w, http.StatusOK, mergeCluster(views))
	case "/api/v1/locks":
		out := map[string]any{"locks": mergeList(views, "locks", nil), "more": anyTrue(views, "more"), "revisions": revisions(views), "errors": viewErrors(views)}
		apiwire.WriteJSON(w, http.StatusOK, out)
	case "/api/v1/members":
		out := map[string]any{"members": mergeList(views, "members", cellMember), "errors": viewErrors(views)}
		apiwire.WriteJSON(w, http.StatusOK, out)
	}
}

// cellMember names a member by its cell: "<cell>/<id>".
func cellMember(cell string, m map[string]any) {
	if id, ok := m["id"].(string); ok {
		m["id"] = cell + "/" + id
	}
	m["cell"] = cell
}

func mergeList(views []cellView, key string, each func(cell string, m map[string]any)) []any {
	out := []any{}
	for _, v := range views {
		list, _ := v.body[key].([]any)
		for _, x := range list {
			if m, ok := x.(map[string]any); ok && each != nil {
				each(v.cell, m)
			}
			out = append(out, x)
		}
	}
	return out
}

func anyTrue(views []cellView, key string) bool {
	for _, v := range views {
		if v.body[key] == true {
			return true
		}
	}
	return false
}

func revisions(views []cellView) map[string]any {
	out := map[string]any{}
	for _, v := range views {
		if v.err == nil {
			out[v.cell] = v.body["revision"]
		}
	}
	return out
}

func viewErrors(views []cellView) map[string]string {
	out := map[string]string{}
	for _, v := range views {
		if v.err != nil {
			out[v.cell] = v.err.Error()
		}
	}
	return out
}

// mergeCluster is the console's cluster view of every cell: members named
// "<cell>/<id>", each cell's leader and revision in one line, sessions
// and lock queues of all cells (lock paths name their cell already).
func mergeCluster(views []cellView) map[string]any {
	var leaders, revs []string
	for _, v := range views {
		if v.err != nil {
			leaders = append(leaders, v.cell+": unreachable")
			continue
		}
		leaders = append(leaders, fmt.Sprintf("%s: %v", v.cell, v.body["leader"]))
		revs = append(revs, fmt.Sprintf("%s: %v", v.cell, v.body["revision"]))
	}
	return map[string]any{
		"member":   "gateway",
		"leader":   strings.Join(leaders, ", "),
		"revision": strings.Join(revs, ", "),
		"members":  mergeList(views, "members", cellMember),
		"sessions": mergeList(views, "sessions", func(cell string, m map[string]any) { m["cell"] = cell }),
		"locks":    mergeList(views, "locks", nil),
		"errors":   viewErrors(views),
	}
}

// gatewayClusterPoll is how often the merged cluster stream reads the
// cells again.
const gatewayClusterPoll = 500 * time.Millisecond

// maxGatewayClusterStreams bounds the merged cluster streams a gateway
// serves at once: each reads every cell twice a second.
const maxGatewayClusterStreams = 64

// clusterEvents streams the merged cluster view: now and whenever it
// changed.
func (g *gateway) clusterEvents(w http.ResponseWriter, r *http.Request) {
	if n := g.clusterStreams.Add(1); n > maxGatewayClusterStreams {
		g.clusterStreams.Add(-1)
		apiwire.WriteError(w, fmt.Errorf("%w: %d console cluster streams open on this gateway", session.ErrBusy, maxGatewayClusterStreams))
		return
	}
	defer g.clusterStreams.Add(-1)
	identity := g.callerIdentity(r)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	var last []byte
	tick := time.NewTicker(gatewayClusterPoll)
	defer tick.Stop()
	for {
		b, _ := json.Marshal(mergeCluster(g.readCells(r.Context(), "/api/v1/cluster", identity)))
		if string(b) != string(last) {
			if _, err := fmt.Fprintf(w, "event: cluster\ndata: %s\n\n", b); err != nil || rc.Flush() != nil {
				return
			}
			last = b
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}
