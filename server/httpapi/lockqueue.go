package httpapi

// API routes that list locks: one path's queue and every queue (the
// console's view), in the JSON shape of lock.go.

import (
	"net/http"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// lockQueue answers GET /api/v1/locks/{path} (and .../queue, or
// ?view=queue); the history view is lockHistory (lockroute.go).
func (a *API) lockQueue(w http.ResponseWriter, r *http.Request, c caller) {
	path, view, err := lockView(r)
	if err != nil {
		apiError(w, err)
		return
	}
	if view == "history" {
		a.lockHistory(w, r, c, path)
		return
	}
	cc, _, err := a.conn(r, c)
	if err != nil {
		apiError(w, err)
		return
	}
	resp, err := a.call(r, cc, &session.Request{Type: session.MsgLockQueue, Path: path})
	if err != nil {
		apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": path, "queue": a.apiLocks(resp.Locks), "more": resp.More, "revision": resp.Rev})
}

func (a *API) apiLocks(in []session.LockInfo) []apiLock {
	out := make([]apiLock, 0, len(in))
	for _, li := range in {
		l := apiLock{
			Path: li.Path, Mode: modeName(li.Mode), Session: li.Session, Revision: li.Rev, Granted: li.Granted,
			FencingToken: li.Token, GrantedAt: jsonTime(li.GrantTime), ExpiresAt: jsonTime(li.Deadline),
			HoldTTLMillis: li.HoldTTLMillis, LockDelayMillis: li.LockDelayMillis,
			LockDelay: li.Phantom, DelayEndsAt: jsonTime(li.DelayEnd),
		}
		if !li.Phantom {
			l.Node = li.Node
			if data, _, err := a.m.Get(li.Node); err == nil {
				l.ClientID = string(data)
			}
		}
		out = append(out, l)
	}
	return out
}

// maxAPILockPaths bounds GET /api/v1/locks.
const maxAPILockPaths = 1000

// allLocks lists every lock queue (GET /api/v1/locks).
func (a *API) allLocks(w http.ResponseWriter, r *http.Request, c caller) {
	if err := a.m.LinearizableRead(r.Context()); err != nil {
		apiError(w, err)
		return
	}
	rev := a.m.Applied()
	locks, more, err := a.lockQueues(c.identity)
	if err != nil {
		apiError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"locks": locks, "more": more, "revision": rev})
}

type apiQueue struct {
	Path  string    `json:"path"`
	Queue []apiLock `json:"queue"`
}

// lockQueues reads every queue from this member's state that identity
// may read (ACL rules).
func (a *API) lockQueues(identity string) ([]apiQueue, bool, error) {
	paths, more, err := a.m.LockPaths(maxAPILockPaths)
	if err != nil {
		return nil, false, err
	}
	out := make([]apiQueue, 0, len(paths))
	for _, p := range paths {
		if a.m.Authorize(identity, p, namespace.PermRead) != nil {
			continue
		}
		q, err := a.m.LockQueue(p)
		if err != nil {
			return nil, false, err
		}
		if len(q) == 0 {
			continue // an ancestor the index tracks for hierarchy, no queue of its own
		}
		infos := make([]session.LockInfo, 0, len(q))
		for _, li := range q {
			infos = append(infos, wireLockInfo(li))
		}
		out = append(out, apiQueue{Path: p, Queue: a.apiLocks(infos)})
	}
	return out, more, nil
}

func wireLockInfo(q namespace.LockInfo) session.LockInfo {
	return session.LockInfo{
		Node: q.Node, Path: q.Path, Mode: session.LockMode(q.Mode), Session: q.Session, Rev: q.Rev,
		HoldTTLMillis: q.HoldTTLMillis, LockDelayMillis: q.LockDelayMillis,
		Granted: q.Granted, Token: q.Token, GrantTime: q.GrantTime, Deadline: q.Deadline,
		Phantom: q.Phantom, DelayEnd: q.DelayEnd,
	}
}
