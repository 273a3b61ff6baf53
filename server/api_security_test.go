package server_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/server/servertest"
)

// TestAPIImplicitLeaseTakeover: what the queue shows of an implicit
// lease (client_id, fencing_token, session) is not enough to renew or
// release it: that takes the lease_token of the acquire answer, which
// no read shows. The holder's token keeps working after the leader is
// killed (its secret was replicated), its renewal may change ttl_ms (the
// hold and the session both, through the log), and every expires_at is
// the earlier of the hold deadline and the session's end.
func TestAPIImplicitLeaseTakeover(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := proc.StartCluster(t, 3)
	li := c.WaitLeader(t)
	f := c.Nodes[(li+1)%3].APIAddr
	api := newAPIClient(t, c.Certs.CA)
	const lock = "/api/v1/locks/jobs/takeover"

	a := api.do(200, f, "POST", lock+"/acquire", map[string]any{"client_id": "w1", "ttl_ms": 20000})
	lease, token := a.str("lease_token"), a.num("fencing_token")
	if a["acquired"] != true || lease == "" || !strings.HasPrefix(lease, fmt.Sprint(a.num("session_id"))+".") {
		t.Fatalf("acquire answer: %v", a)
	}
	_, secret, _ := strings.Cut(lease, ".")
	// No read shows the secret: the queue, every queue, the cluster view,
	// the sessions.
	for _, p := range []string{lock, lock + "/queue", "/api/v1/locks", "/api/v1/cluster", "/api/v1/sessions"} {
		body := rawBody(t, api, f, p)
		if strings.Contains(body, secret) {
			t.Fatalf("GET %s shows the lease secret: %s", p, body)
		}
		if p == lock && !strings.Contains(body, `"client_id": "w1"`) {
			t.Fatalf("GET %s does not show the holder's client_id: %s", p, body)
		}
	}

	// The takeover of issue 27: the values the queue shows, a guessed
	// secret, another lease's token. Each refused; the lock stays held.
	other := api.do(200, f, "POST", "/api/v1/locks/jobs/mine/acquire", map[string]any{"client_id": "mallory", "ttl_ms": 20000})
	for _, action := range []string{"renew", "release"} {
		for _, tc := range []struct {
			body map[string]any
			code int
			name string
		}{
			{map[string]any{"client_id": "w1", "fencing_token": token}, 401, "UnknownSession"},
			{map[string]any{"client_id": "w1", "fencing_token": token, "lease_token": fmt.Sprintf("%d.%s", a.num("session_id"), strings.Repeat("ab", 16))}, 401, "BadSecret"},
			{map[string]any{"client_id": "w1", "fencing_token": token, "lease_token": other.str("lease_token")}, 401, "BadSecret"},
			{map[string]any{"node": a.str("node"), "lease_token": "garbage"}, 401, "BadSecret"},
		} {
			if e := api.do(tc.code, f, "POST", lock+"/"+action, tc.body); e.str("name") != tc.name {
				t.Fatalf("%s with %v: %v, want %s", action, tc.body, e, tc.name)
			}
		}
	}
	if try := api.do(200, f, "POST", lock+"/acquire", map[string]any{"client_id": "mallory", "ttl_ms": 5000}); try["acquired"] != false {
		t.Fatalf("the lock was free after the takeover attempts: %v", try)
	}

	// The holder renews with a longer ttl_ms: the hold and the session
	// both take it, and the answer says when the lock really ends.
	before := time.Now()
	rn := api.do(200, f, "POST", lock+"/renew", map[string]any{"fencing_token": token, "lease_token": lease, "ttl_ms": 45000})
	end := parseTime(t, rn.str("new_expires_at"))
	if rn["renewed"] != true || rn.num("ttl_ms") != 45000 || end.Before(before.Add(40*time.Second)) || rn.str("expires_with") == "" {
		t.Fatalf("renew with ttl_ms 45000 at %v: %v", before, rn)
	}
	q := api.do(200, f, "GET", lock, nil).list("queue")[0].(map[string]any)
	if q["ttl_ms"].(float64) != 45000 || parseTime(t, q["expires_at"].(string)).Before(before.Add(40*time.Second)) {
		t.Fatalf("queue after the renewal: %v", q)
	}
	if ttl := sessionTTL(t, api, f, a.num("session_id")); ttl != 45000 {
		t.Fatalf("the implicit lease's session TTL is %d after a renewal with ttl_ms 45000", ttl)
	}

	// A leader change: the new leader checks the same token.
	c.Nodes[li].Kill(t)
	nl := c.WaitLeader(t)
	via := c.Nodes[nl].APIAddr
	// The TTL the renewal set was in the log: the new leader has it.
	servertest.Eventually(t, "the session TTL on the new leader", func() error {
		code, out, err := api.raw(via, "GET", "/api/v1/sessions", nil)
		if err != nil || code != 200 {
			return fmt.Errorf("%d %v %v", code, out, err)
		}
		for _, x := range out.list("sessions") {
			if x := apiReply(x.(map[string]any)); x.num("id") == a.num("session_id") && x.num("ttl_ms") == 45000 {
				return nil
			}
		}
		return fmt.Errorf("session %d not listed with TTL 45000: %v", a.num("session_id"), out)
	})
	if e := api.do(401, via, "POST", lock+"/renew", map[string]any{"client_id": "w1", "fencing_token": token}); e.str("name") != "UnknownSession" {
		t.Fatalf("takeover after the leader change: %v", e)
	}
	servertest.Eventually(t, "the holder's renewal on the new leader", func() error {
		code, out, err := api.raw(via, "POST", lock+"/renew", map[string]any{"fencing_token": token, "lease_token": lease, "ttl_ms": 20000})
		if err != nil || code != 200 {
			return fmt.Errorf("%d %v %v", code, out, err)
		}
		if out.num("ttl_ms") != 20000 {
			return fmt.Errorf("ttl_ms not changed: %v", out)
		}
		return nil
	})
	if ttl := sessionTTL(t, api, via, a.num("session_id")); ttl != 20000 {
		t.Fatalf("session TTL %d after a renewal with ttl_ms 20000 on the new leader", ttl)
	}
	// Release by the holder on the new leader ends the implicit lease too.
	api.do(200, via, "POST", lock+"/release", map[string]any{"fencing_token": token, "lease_token": lease})
	if ttl := sessionTTL(t, api, via, a.num("session_id")); ttl != 0 {
		t.Fatalf("the implicit lease outlived its release on the new leader (TTL %d)", ttl)
	}

	// expires_at is the real end: ttl_ms above the session bound (the
	// cluster setting max_session_ttl_ms, 600 s) ends with the session
	// unless renewed.
	before = time.Now()
	long := api.do(200, via, "POST", "/api/v1/locks/jobs/long/acquire", map[string]any{"client_id": "w2", "ttl_ms": 3600000})
	if long.str("expires_with") != "session" || parseTime(t, long.str("expires_at")).After(time.Now().Add(601*time.Second)) ||
		long.num("ttl_ms") != 3600000 {
		t.Fatalf("a 1 h hold on a session of at most 600 s answers %v (asked at %v)", long, before)
	}
	short := api.do(200, via, "POST", "/api/v1/locks/jobs/short/acquire", map[string]any{"client_id": "w3", "ttl_ms": 3000})
	if at := parseTime(t, short.str("expires_at")); at.After(time.Now().Add(3*time.Second)) || short.str("expires_with") == "" {
		t.Fatalf("a 3 s hold answers %v", short)
	}
}

// TestAPIBrowserRequestsRefused: against real members, the requests a
// hostile page can make a browser send (text/plain and form bodies, a
// foreign Origin, Sec-Fetch-Site cross-site or same-site, a rebound Host)
// are refused before anything happens, names given with --api-hosts are
// served, the console and the API answer with a strict CSP and frame
// protection, and the cell map node is refused to a non-admin.
func TestAPIBrowserRequestsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := proc.StartCluster(t, 3, "--api-hosts", "latch.test")
	li := c.WaitLeader(t)
	f := c.Nodes[(li+1)%3].APIAddr
	api := newAPIClient(t, c.Certs.CA)

	for _, tc := range []struct {
		name, path, body string
		hdr              []string
		code             int
	}{
		{"text/plain create", "/api/v1/nodes/evil1", `{"data":"x"}`, []string{"Content-Type: text/plain"}, 415},
		{"form lock", "/api/v1/locks/evil2/acquire", `client_id=x&ttl_ms=5000`, []string{"Content-Type: application/x-www-form-urlencoded"}, 415},
		{"form multi", "/api/v1/multi", `ops=x`, []string{"Content-Type: application/x-www-form-urlencoded", "Origin: https://evil.example"}, 403},
		{"foreign origin", "/api/v1/nodes/evil3", `{"data":"x"}`, []string{"Origin: https://evil.example"}, 403},
		{"another local port", "/api/v1/nodes/evil4", `{"data":"x"}`, []string{"Origin: https://127.0.0.1:1", "Sec-Fetch-Site: same-site"}, 403},
		{"cross-site fetch", "/api/v1/locks/evil5/acquire", `{"client_id":"x","ttl_ms":5000}`, []string{"Sec-Fetch-Site: cross-site"}, 403},
		{"rebound host", "/api/v1/nodes/evil6", `{"data":"x"}`, []string{"Host: evil.example"}, 403},
	} {
		if code, out, err := api.raw(f, "POST", tc.path, tc.body, tc.hdr...); err != nil || code != tc.code || out.str("message") == "" {
			t.Fatalf("%s: %d %v %v, want %d", tc.name, code, out, err, tc.code)
		}
	}
	for _, p := range []string{"evil1", "evil2", "evil3", "evil4", "evil5", "evil6"} {
		api.do(404, f, "GET", "/api/v1/stat/"+p, nil)
	}
	// The same requests as the API's own pages and tools send them.
	api.do(201, f, "POST", "/api/v1/nodes/good1", map[string]any{"data": "x"}, "Origin: https://"+f, "Sec-Fetch-Site: same-origin")
	api.do(201, f, "POST", "/api/v1/nodes/good2", map[string]any{"data": "x"}, "Host: latch.test")
	api.do(200, f, "GET", "/api/v1/stat/good2", nil, "Host: localhost:1")
	api.do(200, f, "GET", "/api/v1/health", nil, "Sec-Fetch-Site: cross-site", "Sec-Fetch-Mode: navigate")

	for _, p := range []string{"/", "/console/console.js", "/api/v1/health", "/api/v1/nodes/nope"} {
		resp, err := api.hc.Get("https://" + f + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") ||
			resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("GET %s: headers %v", p, resp.Header)
		}
	}

	// The cell map is an admin's: clients without a certificate (not
	// admins here) may create beside it, not it.
	api.do(201, f, "POST", "/api/v1/nodes/m", nil)
	if e := api.do(403, f, "POST", "/api/v1/nodes/m/latch-cellmap", map[string]any{"data": `{"cells":{"m":["127.0.0.1:1"]}}`}); e.str("name") != "PermissionDenied" {
		t.Fatalf("a non-admin wrote the cell map: %v", e)
	}
}

// rawBody GETs path and returns the body as text.
func rawBody(t *testing.T, api *apiClient, addr, path string) string {
	t.Helper()
	resp, err := api.hc.Get("https://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", path, resp.StatusCode, err)
	}
	return string(b)
}

func parseTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return at
}

// sessionTTL is session id's TTL as GET /api/v1/sessions lists it (0: not
// listed).
func sessionTTL(t *testing.T, api *apiClient, addr string, id uint64) uint64 {
	t.Helper()
	for _, x := range api.do(200, addr, "GET", "/api/v1/sessions", nil).list("sessions") {
		if x := apiReply(x.(map[string]any)); x.num("id") == id {
			return x.num("ttl_ms")
		}
	}
	return 0
}
