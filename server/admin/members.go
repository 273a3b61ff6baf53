package admin

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/session"
)

// The status and membership endpoints of `latch status` and `latch
// member`: status, list, join and remove (members and admins), add (as a
// voter or a learner) and promote (admins), and snapshots.

func (e *endpoint) handleStatus(w http.ResponseWriter, r *http.Request) {
	st, err := e.m.Status()
	if err != nil {
		e.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (e *endpoint) handleJoin(w http.ResponseWriter, r *http.Request, by Caller) {
	var req adminapi.JoinRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if err := by.MayChange(req.ID, req.Replace); err != nil {
		e.writeError(w, err)
		return
	}
	if e.redirectToLeader(w, r) {
		return
	}
	if err := e.m.Join(r.Context(), req, by); err != nil {
		e.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, adminapi.Reply{OK: true})
}

func (e *endpoint) handleRemove(w http.ResponseWriter, r *http.Request, by Caller) {
	var req adminapi.MemberRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if err := by.MayChange(req.ID, false); err != nil {
		e.writeError(w, err)
		return
	}
	if e.redirectToLeader(w, r) {
		return
	}
	if err := e.m.Remove(r.Context(), req.ID, by); err != nil {
		e.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, adminapi.Reply{OK: true})
}

func (e *endpoint) handleMembers(w http.ResponseWriter, r *http.Request) {
	ms, err := e.m.Members()
	if err != nil {
		e.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, adminapi.MembersReply{Members: ms, Warning: adminapi.VoterWarning(ms)})
}

func (e *endpoint) handleMemberAdd(w http.ResponseWriter, r *http.Request) {
	var req adminapi.AddMemberRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if e.redirectToLeader(w, r) {
		return
	}
	var err error
	if req.Learner {
		err = e.m.AddLearner(r.Context(), req.ID, req.RaftAddr)
	} else {
		err = e.m.Join(r.Context(), adminapi.JoinRequest{ID: req.ID, RaftAddr: req.RaftAddr}, Caller{Admin: true})
	}
	e.writeMembers(w, err)
}

func (e *endpoint) handleMemberPromote(w http.ResponseWriter, r *http.Request) {
	var req adminapi.MemberRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if e.redirectToLeader(w, r) {
		return
	}
	e.writeMembers(w, e.m.Promote(r.Context(), req.ID))
}

// writeMembers answers a membership change with the new configuration and
// its warning.
func (e *endpoint) writeMembers(w http.ResponseWriter, err error) {
	if err != nil {
		e.writeError(w, err)
		return
	}
	ms, err := e.m.Members()
	if err != nil {
		e.writeError(w, err)
		return
	}
	reply := adminapi.MembersReply{Members: ms, Warning: adminapi.VoterWarning(ms)}
	if reply.Warning != "" {
		e.cfg.Log.Warn("membership changed", "warning", reply.Warning)
	}
	writeJSON(w, http.StatusOK, reply)
}

func (e *endpoint) handleSnapshot(w http.ResponseWriter, r *http.Request, _ Caller) {
	every := e.cfg.SnapshotMinInterval
	if wait := e.snapLimit.take(e.cfg.Clock(), every); wait > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(int(wait.Seconds()+1)))
		e.writeError(w, fmt.Errorf("%w: retry in %v (at most one per %v)", session.ErrSnapshotTooSoon, wait.Round(time.Millisecond), every))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	if err := e.m.Snapshot(ctx); err != nil {
		e.writeError(w, err)
		return
	}
	st, _ := e.m.Status()
	writeJSON(w, http.StatusOK, adminapi.Reply{OK: true, Index: st.SnapshotIndex})
}

// snapLimiter spaces the snapshots asked for on the admin endpoint: each
// writes the whole namespace to disk, so a loop of requests would fill it.
type snapLimiter struct {
	mu   sync.Mutex
	last time.Time
}

// take returns 0 and records now when a snapshot may start, else how long
// until one may.
func (l *snapLimiter) take(now time.Time, every time.Duration) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() {
		if wait := l.last.Add(every).Sub(now); wait > 0 {
			return wait
		}
	}
	l.last = now
	return 0
}
