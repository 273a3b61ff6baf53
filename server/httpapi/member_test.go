package httpapi

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/apiwire"
	"github.com/latch-io/latch/session"
)

// fakeMember is a member as the API sees it, for the API's own logic
// (routing, tokens, forwarding, error shapes): it answers the calls a
// test sets up and records the requests the handlers received. A method
// a test does not expect panics through the nil embedded Member (the
// API answers a panic 500 Internal, which the tests check against).
type fakeMember struct {
	Member
	leader  string // the leader's ID ("": none known)
	self    string
	secrets map[uint64][]byte
	answer  func(req *session.Request) (*session.Response, error)

	mu       sync.Mutex
	calls    []session.Request
	attached []uint64
}

func (m *fakeMember) Leader() (string, string) { return m.leader, "" }
func (m *fakeMember) IsLeader() bool           { return m.leader != "" && m.leader == m.self }
func (m *fakeMember) MemberAPIAddr(string) string {
	return "" // no address recorded: nothing to forward to
}

func (m *fakeMember) Session(id uint64) (namespace.SessionInfo, error) {
	if s, ok := m.secrets[id]; ok {
		return namespace.SessionInfo{ID: id, Secret: s}, nil
	}
	return namespace.SessionInfo{}, namespace.ErrNoSession
}

func (m *fakeMember) Conn(identity string) Conn { return &fakeConn{m: m} }

type fakeConn struct {
	m        *fakeMember
	attached map[uint64]bool
}

func (c *fakeConn) Attach(id uint64) {
	if c.attached == nil {
		c.attached = map[uint64]bool{}
	}
	c.attached[id] = true
	c.m.mu.Lock()
	c.m.attached = append(c.m.attached, id)
	c.m.mu.Unlock()
}

func (c *fakeConn) Call(_ context.Context, req *session.Request) (*session.Response, error) {
	if req.Session != 0 && !c.attached[req.Session] {
		return nil, fmt.Errorf("%w: session %d is not attached", session.ErrUnknownSession, req.Session)
	}
	c.m.mu.Lock()
	c.m.calls = append(c.m.calls, *req)
	c.m.mu.Unlock()
	return c.m.answer(req)
}

func newTestAPI(m *fakeMember) http.Handler {
	a := &API{cfg: Config{ID: m.self, MaxRequests: 8, MaxWatches: 8, MaxBody: 1 << 20, ApplyTimeout: 50 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, m: m}
	a.routes = a.routeTable()
	return a.Handler("127.0.0.1:7423")
}

func serve(h http.Handler, method, path, token, body string) (*httptest.ResponseRecorder, apiwire.ErrorBody) {
	req := httptest.NewRequest(method, "https://127.0.0.1:7423"+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set(hdrSession, token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var e apiwire.ErrorBody
	if rec.Code >= 400 {
		_ = json.Unmarshal(rec.Body.Bytes(), &e)
	}
	return rec, e
}

// A request becomes the QUIC front's request and runs through the
// member's handlers: path, data and session as the handler gets them,
// the answer as JSON, an error with its code's status.
func TestRequestsRunThroughHandlers(t *testing.T) {
	m := &fakeMember{leader: "n1", self: "n1", secrets: map[uint64][]byte{5: {0x00, 0xff}}}
	m.answer = func(req *session.Request) (*session.Response, error) {
		if req.Path == "/taken" {
			return nil, fmt.Errorf("%w: %s", namespace.ErrNodeExists, req.Path)
		}
		return &session.Response{Path: req.Path, Rev: 7}, nil
	}
	h := newTestAPI(m)

	rec, _ := serve(h, "POST", "/api/v1/nodes/a/b", "5."+hex.EncodeToString([]byte{0x00, 0xff}), `{"data":"x","ephemeral":true}`)
	var out struct {
		Path     string `json:"path"`
		Revision uint64 `json:"revision"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != http.StatusCreated || out.Path != "/a/b" || out.Revision != 7 {
		t.Fatalf("create: %d %s", rec.Code, rec.Body)
	}
	got := m.calls[0]
	if got.Type != session.MsgCreate || got.Path != "/a/b" || string(got.Data) != "x" || got.Flags != namespace.FlagEphemeral || got.Session != 5 {
		t.Fatalf("the handler got %+v", got)
	}
	if len(m.attached) != 1 || m.attached[0] != 5 {
		t.Fatalf("attached sessions %v, want the token's (5)", m.attached)
	}

	if rec, e := serve(h, "POST", "/api/v1/nodes/taken", "", `{}`); rec.Code != http.StatusConflict || e.Code != session.CodeNodeExists {
		t.Fatalf("a handler's error: %d %+v", rec.Code, e)
	}
	// A wrong secret attaches nothing and reaches no handler.
	n := len(m.calls)
	if rec, e := serve(h, "GET", "/api/v1/nodes/a", "5.00fe", ""); rec.Code != http.StatusUnauthorized || e.Code != session.CodeBadSecret {
		t.Fatalf("wrong secret: %d %+v", rec.Code, e)
	}
	if rec, e := serve(h, "GET", "/api/v1/nodes/a", "6.00ff", ""); rec.Code != http.StatusGone || e.Code != session.CodeSessionExpired {
		t.Fatalf("unknown session: %d %+v", rec.Code, e)
	}
	if len(m.calls) != n || len(m.attached) != 1 {
		t.Fatalf("refused tokens reached the handlers (%d calls, attached %v)", len(m.calls)-n, m.attached)
	}
}

// A leader-only request on a member that knows no leader (or none it can
// reach) is looked for until ApplyTimeout, then answered NoLeader; it
// never reaches this member's handlers.
func TestNoLeaderAnswersNoLeader(t *testing.T) {
	for _, leader := range []string{"", "n1"} { // none known; known, no API address
		m := &fakeMember{leader: leader, self: "n2"}
		m.answer = func(*session.Request) (*session.Response, error) {
			t.Error("a follower ran a leader-only request itself")
			return &session.Response{}, nil
		}
		rec, e := serve(newTestAPI(m), "GET", "/api/v1/nodes/a", "", "")
		if rec.Code != http.StatusServiceUnavailable || e.Code != session.CodeNoLeader {
			t.Fatalf("leader %q: %d %+v", leader, rec.Code, e)
		}
	}
}
