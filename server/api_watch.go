package server

// Server-Sent Events: watches, election observation and the console's
// cluster view. A watch is the QUIC front's watch (the same hub, history
// and per-watch bound) written as SSE: one message per revision, so the
// SSE id is the revision and a client that reconnects with
// Last-Event-ID resumes exactly after the last revision it saw.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/watch"
	"github.com/latch-io/latch/session"
)

// ssePing is how often an idle event stream sends a comment, so that
// proxies keep it open and a vanished client is noticed.
const ssePing = 15 * time.Second

// sseRetry is the reconnection delay an EventSource is told to use.
const sseRetry = 500 * time.Millisecond

// sse writes one event stream.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startSSE(w http.ResponseWriter) (*sse, error) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: http.NewResponseController(w)}
	if _, err := fmt.Fprintf(w, "retry: %d\n\n", sseRetry.Milliseconds()); err != nil {
		return nil, err
	}
	return s, s.rc.Flush()
}

// event writes one message; id "" sends none (the client's last id
// stays). It flushes unless more follow at once (flush false).
func (s *sse) event(id, name string, data any, flush bool) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	var sb strings.Builder
	if id != "" {
		sb.WriteString("id: " + id + "\n")
	}
	sb.WriteString("event: " + name + "\ndata: ")
	sb.Write(b)
	sb.WriteString("\n\n")
	if _, err := s.w.Write([]byte(sb.String())); err != nil {
		return err
	}
	if flush {
		return s.rc.Flush()
	}
	return nil
}

func (s *sse) ping() error {
	if _, err := s.w.Write([]byte(": ping\n\n")); err != nil {
		return err
	}
	return s.rc.Flush()
}

// parseKind reads ?kind=data,children,exists,recursive,locks (default
// data).
func parseKind(v string) (session.WatchKind, error) {
	var k session.WatchKind
	if v == "" {
		return session.WatchData, nil
	}
	for _, part := range strings.Split(v, ",") {
		switch strings.TrimSpace(part) {
		case "data":
			k |= session.WatchData
		case "children":
			k |= session.WatchChildren
		case "exists":
			k |= session.WatchExists
		case "recursive":
			k |= session.WatchRecursive
		case "locks":
			k |= session.WatchLocks
		default:
			return 0, fmt.Errorf("%w: watch kind %q is not data, children, exists, recursive or locks", namespace.ErrBadCommand, part)
		}
	}
	return k, nil
}

// apiEvent is one event of a watch message. Lock events (kind=locks:
// lock-granted, lock-released, lock-lost, lock-contended) name the
// request node in Path and its holder in Session, with the hold's token
// and mode, how it ended (cause, as lock history records it) and the
// conflicting request (waiter).
type apiEvent struct {
	Type          string `json:"type"`
	Path          string `json:"path"`
	Session       uint64 `json:"session_id,omitempty"`
	Token         uint64 `json:"token,omitempty"`
	Mode          string `json:"mode,omitempty"`
	Cause         string `json:"cause,omitempty"`
	Waiter        string `json:"waiter,omitempty"`
	WaiterSession uint64 `json:"waiter_session_id,omitempty"`
}

func apiEventOf(e *session.WatchEvent) apiEvent {
	ev := apiEvent{Type: e.Type.String(), Path: e.Path, Session: e.Session}
	if e.Type.IsLockEvent() {
		ev.Token, ev.Mode, ev.Cause = e.Token, e.Mode.String(), e.Cause
		ev.Waiter, ev.WaiterSession = e.Waiter, e.WaiterSession
	}
	return ev
}

// apiChange is one watch message: the events of one revision.
type apiChange struct {
	Revision uint64     `json:"revision"`
	Events   []apiEvent `json:"events"`
}

// watchSlot takes one of the API's event-stream slots and counts the
// stream against its identity's watches (MaxWatchesPerIdentity, shared
// with the QUIC front).
func (a *apiFront) watchSlot(identity string) (release func(), err error) {
	if n := a.watches.Add(1); n > int64(a.s.cfg.APIMaxWatches) {
		a.watches.Add(-1)
		return nil, fmt.Errorf("%w: %d event streams open on this member's api", session.ErrTooManyWatches, a.s.cfg.APIMaxWatches)
	}
	if err := a.f.watchesBy.add(identity, a.s.cfg.MaxWatchesPerIdentity); err != nil {
		a.watches.Add(-1)
		a.f.capRefusals.watches.Add(1)
		return nil, err
	}
	return func() {
		a.f.watchesBy.remove(identity)
		a.watches.Add(-1)
	}, nil
}

// watch serves GET /api/v1/watch/{path...}: ready, then change messages
// (id = revision), resync when the history the client asked for is gone
// or it fell behind (then the stream ends; reconnecting with its id goes
// on from there).
func (a *apiFront) watch(w http.ResponseWriter, r *http.Request, c caller) {
	path := apiPath(r)
	if err := namespace.ValidatePath(path, a.s.store.Limits()); err != nil {
		apiError(w, err)
		return
	}
	if err := a.s.store.Authorize(c.identity, path, namespace.PermRead); err != nil {
		apiError(w, err)
		return
	}
	kind, err := parseKind(r.URL.Query().Get("kind"))
	if err != nil {
		apiError(w, err)
		return
	}
	from := r.Header.Get("Last-Event-ID")
	if from == "" {
		from = r.URL.Query().Get("from_revision")
	}
	var fromRev uint64
	if from != "" {
		if fromRev, err = strconv.ParseUint(from, 10, 64); err != nil {
			apiError(w, fmt.Errorf("%w: revision %q is not a number", namespace.ErrBadCommand, from))
			return
		}
	}
	release, err := a.watchSlot(c.identity)
	if err != nil {
		apiError(w, err)
		return
	}
	defer release()
	wt := watch.NewWatcher(path, kind, fromRev, false, nil)
	start := a.f.hub.Register(wt)
	defer a.f.hub.Unregister(wt)
	out, err := startSSE(w)
	if err != nil {
		return
	}
	if err := out.event(strconv.FormatUint(start, 10), "ready", map[string]any{"revision": start, "path": path}, true); err != nil {
		return
	}
	ping := time.NewTicker(ssePing)
	defer ping.Stop()
	var buf []session.WatchEvent
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ping.C:
			if out.ping() != nil {
				return
			}
			continue
		case <-wt.Notify():
		}
		events, done := a.f.hub.Take(wt, buf)
		buf = events
		events = a.f.readableEvents(c.identity, events)
		if writeChanges(out, events) != nil || done {
			return
		}
	}
}

// writeChanges writes events, one message per revision, and flushes.
func writeChanges(out *sse, events []session.WatchEvent) error {
	for i := 0; i < len(events); {
		ev := events[i]
		id := strconv.FormatUint(ev.Rev, 10)
		if ev.Type == session.EventResync {
			if err := out.event(id, "resync", map[string]any{"revision": ev.Rev}, false); err != nil {
				return err
			}
			i++
			continue
		}
		msg := apiChange{Revision: ev.Rev}
		for ; i < len(events) && events[i].Rev == ev.Rev && events[i].Type != session.EventResync; i++ {
			msg.Events = append(msg.Events, apiEventOf(&events[i]))
		}
		if err := out.event(id, "change", msg, false); err != nil {
			return err
		}
	}
	return out.rc.Flush()
}

// observePoll is how often an observation re-reads an election while it
// waits for a grant no node event announces (a tick after lock-delay).
const observePoll = 100 * time.Millisecond

// observe serves GET /api/v1/elections/{path}/observe: a leader message
// now and at every change of leader, term or value.
func (a *apiFront) observe(w http.ResponseWriter, r *http.Request, c caller, path string) {
	if err := namespace.ValidatePath(path, a.s.store.Limits()); err != nil {
		apiError(w, err)
		return
	}
	release, err := a.watchSlot(c.identity)
	if err != nil {
		apiError(w, err)
		return
	}
	defer release()
	wt := watch.NewWatcher(path, session.WatchRecursive|session.WatchData, 0, false, nil)
	a.f.hub.Register(wt)
	defer func() { a.f.hub.Unregister(wt) }()
	out, err := startSSE(w)
	if err != nil {
		return
	}
	poll := time.NewTicker(observePoll)
	defer poll.Stop()
	var last *apiLeader
	var buf []session.WatchEvent
	for {
		ld := a.leaderOf(path)
		if last == nil || ld.None != last.None || ld.Term != last.Term || !sameData(ld.apiData, last.apiData) {
			if err := out.event("", "leader", ld, true); err != nil {
				return
			}
			last = &ld
		}
		select {
		case <-r.Context().Done():
			return
		case <-poll.C:
		case <-wt.Notify():
			var done bool
			buf, done = a.f.hub.Take(wt, buf)
			if done {
				// Fell behind: start over with a fresh watcher.
				a.f.hub.Unregister(wt)
				wt = watch.NewWatcher(path, session.WatchRecursive|session.WatchData, 0, false, nil)
				a.f.hub.Register(wt)
			}
		}
	}
}

func sameData(x, y apiData) bool {
	eq := func(p, q *string) bool { return (p == nil) == (q == nil) && (p == nil || *p == *q) }
	return eq(x.Data, y.Data) && eq(x.DataBase64, y.DataBase64)
}
