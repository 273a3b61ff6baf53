package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/session"
)

// A member may change only itself; replacing needs an admin; a caller
// without a member or admin certificate changes nothing.
func TestCallerMayChange(t *testing.T) {
	for _, c := range []struct {
		by      Caller
		id      string
		replace bool
		ok      bool
	}{
		{Caller{Admin: true}, "n2", true, true},
		{Caller{Member: "n2"}, "n2", false, true},
		{Caller{Member: "n2"}, "n3", false, false},
		{Caller{Member: "n2"}, "n2", true, false},
		{Caller{Identity: "alice"}, "n2", false, false},
		{Caller{}, "n2", false, false},
	} {
		err := c.by.MayChange(c.id, c.replace)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, session.ErrAdminDenied)) {
			t.Errorf("%s changing %s (replace %v): %v, want ok=%v", c.by, c.id, c.replace, err, c.ok)
		}
	}
}

type notLeader struct{ id, addr string }

func (e *notLeader) Error() string                      { return "not the leader" }
func (e *notLeader) LeaderAdmin() (id, httpAddr string) { return e.id, e.addr }

// writeError answers the member's sentinels (Config.Errors), wrapped, with
// their status and code, and what it does not know with 500.
func TestWriteErrorStatus(t *testing.T) {
	errBad, errFresh, errClosed := errors.New("bad"), errors.New("fresh"), errors.New("closed")
	e := &endpoint{cfg: Config{Errors: Errors{BadRequest: errBad, NotFresh: errFresh, Unavailable: []error{errClosed}}}}
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{fmt.Errorf("x: %w", &notLeader{"n1", "127.0.0.1:1"}), http.StatusServiceUnavailable, "not_leader"},
		{fmt.Errorf("%w: upload", errBad), http.StatusBadRequest, "bad_request"},
		{namespace.ErrBadVersion, http.StatusConflict, "bad_version"},
		{fmt.Errorf("%w: 3 nodes", errFresh), http.StatusConflict, "not_fresh"},
		{session.ErrAdminDenied, http.StatusForbidden, session.CodeAdminDenied.String()},
		{errClosed, http.StatusServiceUnavailable, ""},
		{errors.New("disk on fire"), http.StatusInternalServerError, ""},
	} {
		w := httptest.NewRecorder()
		e.writeError(w, c.err)
		var reply adminapi.Reply
		if err := json.Unmarshal(w.Body.Bytes(), &reply); err != nil {
			t.Fatalf("%v: body %q: %v", c.err, w.Body, err)
		}
		if w.Code != c.status || reply.Code != c.code || reply.Error != c.err.Error() {
			t.Errorf("%v: %d %+v, want %d code %q", c.err, w.Code, reply, c.status, c.code)
		}
		if c.code == "not_leader" && (reply.LeaderID != "n1" || reply.LeaderHTTP != "127.0.0.1:1") {
			t.Errorf("not-leader reply names %q at %q", reply.LeaderID, reply.LeaderHTTP)
		}
	}
}

// One snapshot per interval: a second request inside it waits the rest.
func TestSnapLimiter(t *testing.T) {
	var l snapLimiter
	t0 := time.Unix(1000, 0)
	if w := l.take(t0, time.Minute); w != 0 {
		t.Fatalf("first snapshot waits %v", w)
	}
	if w := l.take(t0.Add(20*time.Second), time.Minute); w != 40*time.Second {
		t.Fatalf("second snapshot after 20s waits %v, want 40s", w)
	}
	if w := l.take(t0.Add(time.Minute), time.Minute); w != 0 {
		t.Fatalf("snapshot after the interval waits %v", w)
	}
}
