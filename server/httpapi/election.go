package httpapi

// API routes for elections: an election is an exclusive lock whose request
// node holds the candidate's value (client.Election); the term is the
// fencing token. Campaign and resign are the lock routes' acquire and
// release (lock.go); proclaim sets the held request node's value.

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

func (a *API) electionAction(w http.ResponseWriter, r *http.Request, c caller) {
	path, action, err := splitAction(r, "campaign", "proclaim", "resign")
	if err != nil {
		apiError(w, err)
		return
	}
	var in apiLockBody
	value, err := a.decodeData(w, r, &in)
	if err != nil {
		apiError(w, err)
		return
	}
	switch action {
	case "campaign":
		if value == nil {
			value = []byte{}
		}
		a.acquire(w, r, c, path, session.LockExclusive, value, in, true)
	case "resign":
		a.release(w, r, c, path, in, true)
	case "proclaim":
		info, cc, _, err := a.heldBy(r, c, path, in)
		if err != nil {
			apiError(w, err)
			return
		}
		resp, err := a.call(r, cc, &session.Request{Type: session.MsgSet, Path: info.Node, Data: value, Version: namespace.AnyVersion, Session: info.Session})
		if errors.Is(err, namespace.ErrNoNode) {
			err = fmt.Errorf("%w: no longer the leader of %s", session.ErrNotHeld, path)
		}
		if err != nil {
			apiError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"proclaimed": true, "term": info.Token, "revision": resp.Rev})
	}
}

// electionRead serves GET .../leader (leader-only, linearizable) and
// .../observe (any member, from its own state).
func (a *API) electionRead(w http.ResponseWriter, r *http.Request, c caller) {
	path, action, err := splitAction(r, "leader", "observe")
	if err != nil {
		apiError(w, err)
		return
	}
	if err := a.m.Authorize(c.identity, path, namespace.PermRead); err != nil {
		apiError(w, err)
		return
	}
	if action == "observe" {
		a.observe(w, r, c, path)
		return
	}
	a.atLeader(w, r, c, func(w http.ResponseWriter, r *http.Request, _ caller) {
		if err := a.m.LinearizableRead(r.Context()); err != nil {
			apiError(w, err)
			return
		}
		ld := a.leaderOf(path)
		if ld.None {
			apiError(w, fmt.Errorf("%w: %s", session.ErrNoElectionLeader, path))
			return
		}
		writeJSON(w, http.StatusOK, ld)
	})
}

// apiLeader is an election's state.
type apiLeader struct {
	Path    string `json:"path"`
	None    bool   `json:"none,omitempty"` // nobody leads
	Term    uint64 `json:"term,omitempty"`
	Node    string `json:"node,omitempty"`
	Session uint64 `json:"session_id,omitempty"`
	apiData
	Revision uint64 `json:"revision"`
}

// leaderOf reads the election on path from this member's state: the
// first granted exclusive request that is not in lock-delay leads.
func (a *API) leaderOf(path string) apiLeader {
	for tries := 0; tries < 3; tries++ {
		rev := a.m.Applied()
		q, err := a.m.LockQueue(path)
		if err != nil {
			break
		}
		var holder *namespace.LockInfo
		for i := range q {
			if li := &q[i]; li.Granted && !li.Phantom && li.Mode == namespace.LockExclusive {
				holder = li
				break
			}
		}
		if holder == nil {
			return apiLeader{Path: path, None: true, Revision: rev}
		}
		data, _, err := a.m.Get(holder.Node)
		if err != nil {
			continue // the leader changed in between: read again
		}
		return apiLeader{Path: path, Term: holder.Token, Node: holder.Node, Session: holder.Session, apiData: toAPIData(data), Revision: rev}
	}
	return apiLeader{Path: path, None: true, Revision: a.m.Applied()}
}
