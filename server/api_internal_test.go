package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/server/apispec"
	"github.com/latch-io/latch/server/apiwire"
	"github.com/latch-io/latch/session"
)

// The API's wire names, as a client spells them (package httpapi serves
// them).
const hdrSession = apiwire.HeaderSession

type apiErrorBody = apiwire.ErrorBody

// apiSession is the answer of POST /api/v1/sessions.
type apiSession struct {
	SessionID uint64 `json:"session_id"`
	Token     string `json:"token"`
}

// apiTestClient returns an HTTPS client trusting s's dev CA.
func apiTestClient(t *testing.T, s *Server) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(filepath.Join(s.cfg.DataDir, devTLSDir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

// Bad requests get a 4xx and a body {code, name, message} with the wire
// code; none of them changes anything.
func TestAPIBadInput(t *testing.T) {
	s := startDev(t)
	hc := apiTestClient(t, s)
	base := "https://" + s.APIAddr()
	big := `{"data":"` + strings.Repeat("x", s.cfg.Transport.MaxFrameSize) + `"}`
	before := s.fsmApplied()
	for _, tc := range []struct {
		name, method, path, body string
		hdr                      []string
		status                   int
		code                     session.Code
	}{
		{"bad JSON", "POST", "/api/v1/nodes/a", `{"data":`, nil, 400, session.CodeMalformed},
		{"not an object", "POST", "/api/v1/nodes/a", `[1,2]`, nil, 400, session.CodeMalformed},
		{"two values", "POST", "/api/v1/nodes/a", `{} {}`, nil, 400, session.CodeMalformed},
		{"unknown field", "POST", "/api/v1/nodes/a", `{"dta":"x"}`, nil, 400, session.CodeMalformed},
		{"wrong type", "PUT", "/api/v1/nodes/a", `{"version":"one"}`, nil, 400, session.CodeMalformed},
		{"oversized body", "POST", "/api/v1/nodes/a", big, nil, 413, session.CodeFrameTooLarge},
		{"data over the node limit", "POST", "/api/v1/nodes/a", `{"data":"` + strings.Repeat("x", s.cfg.Limits.MaxDataBytes+1) + `"}`, nil, 413, session.CodeDataTooLarge},
		{"bad base64", "POST", "/api/v1/nodes/a", `{"data_base64":"***"}`, nil, 400, session.CodeMalformed},
		{"data twice", "POST", "/api/v1/nodes/a", `{"data":"a","data_base64":"YQ=="}`, nil, 400, session.CodeBadCommand},
		{"bad path", "GET", "/api/v1/nodes/a//b", "", nil, 400, session.CodeBadPath},
		{"trailing slash", "POST", "/api/v1/nodes/a/", "", nil, 400, session.CodeBadPath},
		{"control char", "GET", "/api/v1/stat/a%01b", "", nil, 400, session.CodeBadPath},
		{"no such route", "GET", "/api/v2/nodes/a", "", nil, 404, session.CodeNoRoute},
		{"no such lock action", "POST", "/api/v1/locks/a/grab", "{}", nil, 404, session.CodeNoRoute},
		{"wrong method", "PATCH", "/api/v1/nodes/a", "{}", nil, 405, session.CodeMethodNotAllowed},
		{"wrong method on sessions", "PUT", "/api/v1/sessions", "{}", nil, 405, session.CodeMethodNotAllowed},
		{"no such node", "GET", "/api/v1/nodes/nope", "", nil, 404, session.CodeNoNode},
		{"bad version query", "DELETE", "/api/v1/nodes/a?version=x", "", nil, 400, session.CodeBadCommand},
		{"bad limit", "GET", "/api/v1/children/?limit=-1", "", nil, 400, session.CodeBadCommand},
		{"bad stale", "GET", "/api/v1/nodes/?stale=maybe", "", nil, 400, session.CodeBadCommand},
		{"bad session token", "GET", "/api/v1/nodes/", "", []string{"Latch-Session: garbage"}, 401, session.CodeUnknownSession},
		{"unknown session", "GET", "/api/v1/nodes/", "", []string{"Latch-Session: 999.abcd"}, 410, session.CodeSessionExpired},
		{"ephemeral without session", "POST", "/api/v1/nodes/e", `{"ephemeral":true}`, nil, 410, session.CodeNoSession},
		{"dot component", "GET", "/api/v1/nodes/a/./b", "", nil, 400, session.CodeBadPath},
		{"acquire without session or client_id", "POST", "/api/v1/locks/l/acquire", `{}`, nil, 401, session.CodeUnknownSession},
		{"bad mode", "POST", "/api/v1/locks/l/acquire", `{"client_id":"c","ttl_ms":1000,"mode":"both"}`, nil, 400, session.CodeBadCommand},
		{"negative wait", "POST", "/api/v1/locks/l/acquire", `{"client_id":"c","ttl_ms":1000,"wait_timeout_ms":-1}`, nil, 400, session.CodeBadCommand},
		{"release of nothing", "POST", "/api/v1/locks/l/release", `{"client_id":"c","fencing_token":5}`, nil, 409, session.CodeNotHeld},
		{"release naming nothing", "POST", "/api/v1/locks/l/release", `{"client_id":"c"}`, nil, 400, session.CodeBadCommand},
		{"campaign without session", "POST", "/api/v1/elections/e/campaign", `{"data":"v"}`, nil, 401, session.CodeUnknownSession},
		{"no election leader", "GET", "/api/v1/elections/e/leader", "", nil, 404, session.CodeNoElectionLeader},
		{"bad watch kind", "GET", "/api/v1/watch/a?kind=everything", "", nil, 400, session.CodeBadCommand},
		{"bad watch revision", "GET", "/api/v1/watch/a", "", []string{"Last-Event-ID: x"}, 400, session.CodeBadCommand},
		{"bad multi op", "POST", "/api/v1/multi", `{"ops":[{"op":"rename","path":"/a"}]}`, nil, 400, session.CodeBadCommand},
		{"get in a multi", "POST", "/api/v1/multi", `{"ops":[{"op":"get","path":"/a"}]}`, nil, 400, session.CodeBadCommand},
		{"bad txn target", "POST", "/api/v1/txn", `{"if":[{"target":"size","path":"/a"}]}`, nil, 400, session.CodeBadCommand},
		{"bad txn cmp", "POST", "/api/v1/txn", `{"if":[{"target":"version","path":"/a","cmp":"=="}]}`, nil, 400, session.CodeBadCommand},
		{"ordered existence", "POST", "/api/v1/txn", `{"if":[{"target":"exists","path":"/a","cmp":">","number":0}]}`, nil, 400, session.CodeBadCommand},
		{"value compare with a number", "POST", "/api/v1/txn", `{"if":[{"target":"value","path":"/a","number":3}]}`, nil, 400, session.CodeBadCommand},
		{"bad txn op", "POST", "/api/v1/txn", `{"else":[{"op":"lock","path":"/a"}]}`, nil, 400, session.CodeBadCommand},
		{"txn compare path", "POST", "/api/v1/txn", `{"if":[{"target":"exists","path":"a/"}]}`, nil, 400, session.CodeBadPath},
		{"bad session id", "POST", "/api/v1/sessions/abc/keepalive", "", nil, 400, session.CodeBadCommand},
		{"negative session TTL", "POST", "/api/v1/sessions", `{"ttl_ms":-5}`, nil, 400, session.CodeBadCommand},
		{"no console file", "GET", "/console/nope.js", "", nil, 404, session.CodeNoRoute},
		// The browser's world (apiwire/guard.go): the bodies a form or a
		// no-cors fetch can send, other origins, other Host names.
		{"text/plain body", "POST", "/api/v1/nodes/a", `{"data":"x"}`, []string{"Content-Type: text/plain"}, 415, session.CodeMalformed},
		{"form body", "POST", "/api/v1/nodes/a", `data=x`, []string{"Content-Type: application/x-www-form-urlencoded"}, 415, session.CodeMalformed},
		{"multipart body", "POST", "/api/v1/multi", `--b--`, []string{"Content-Type: multipart/form-data; boundary=b"}, 415, session.CodeMalformed},
		{"body without a type", "POST", "/api/v1/nodes/a", `{"data":"x"}`, []string{"Content-Type:"}, 415, session.CodeMalformed},
		{"another origin", "POST", "/api/v1/nodes/a", `{"data":"x"}`, []string{"Origin: https://evil.example"}, 403, session.CodePermissionDenied},
		{"another port's origin", "POST", "/api/v1/nodes/a", `{"data":"x"}`, []string{"Origin: https://127.0.0.1:1"}, 403, session.CodePermissionDenied},
		{"null origin", "POST", "/api/v1/nodes/a", `{"data":"x"}`, []string{"Origin: null"}, 403, session.CodePermissionDenied},
		{"cross-site fetch", "POST", "/api/v1/nodes/a", `{"data":"x"}`, []string{"Sec-Fetch-Site: cross-site"}, 403, session.CodePermissionDenied},
		{"same-site fetch", "POST", "/api/v1/locks/l/acquire", `{"client_id":"c","ttl_ms":1000}`, []string{"Sec-Fetch-Site: same-site"}, 403, session.CodePermissionDenied},
		{"cross-site read", "GET", "/api/v1/nodes/", "", []string{"Sec-Fetch-Site: cross-site", "Sec-Fetch-Mode: cors"}, 403, session.CodePermissionDenied},
		{"cross-site navigation that writes", "POST", "/api/v1/nodes/a", `{"data":"x"}`, []string{"Sec-Fetch-Site: cross-site", "Sec-Fetch-Mode: navigate"}, 403, session.CodePermissionDenied},
		{"rebound host", "GET", "/api/v1/nodes/", "", []string{"Host: evil.example"}, 403, session.CodePermissionDenied},
		{"rebound host and port", "POST", "/api/v1/nodes/a", `{"data":"x"}`, []string{"Host: evil.example:7423"}, 403, session.CodePermissionDenied},
		{"another IP", "GET", "/api/v1/nodes/", "", []string{"Host: 10.1.2.3"}, 403, session.CodePermissionDenied},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
			if tc.body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			for _, h := range tc.hdr {
				k, v, _ := strings.Cut(h, ":")
				if k == "Host" {
					req.Host = strings.TrimSpace(v)
					continue
				}
				if strings.TrimSpace(v) == "" {
					req.Header.Del(k)
					continue
				}
				req.Header.Set(k, strings.TrimSpace(v))
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body apiErrorBody
			b, _ := io.ReadAll(resp.Body)
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatalf("body %q: %v", b, err)
			}
			if resp.StatusCode != tc.status || body.Code != tc.code || body.Name != tc.code.String() || body.Message == "" {
				t.Fatalf("%s %s: %d %+v, want %d %v", tc.method, tc.path, resp.StatusCode, body, tc.status, tc.code)
			}
		})
	}
	// Refusals cost no log entry, except the rejections the state machine
	// decides (the ephemeral create without a session, the bad version).
	if after := s.fsmApplied(); after > before+4 {
		t.Fatalf("bad requests applied %d entries", after-before)
	}
}

// Every operation the OpenAPI document lists answers on a live member
// (not NoRoute, not MethodNotAllowed, no 5xx). That every route the API
// serves is documented is httpapi's TestAPIOpenAPIRoutes.
func TestAPIOpenAPI(t *testing.T) {
	s := startDev(t)
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(apispec.Document, &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi.json: %v (version %q)", err, doc.OpenAPI)
	}
	type op struct{ method, path string }
	var documented []op
	for p, ops := range doc.Paths {
		for m := range ops {
			documented = append(documented, op{strings.ToUpper(m), p})
		}
	}
	sort.Slice(documented, func(i, j int) bool {
		return documented[i].path+documented[i].method < documented[j].path+documented[j].method
	})
	// Every documented operation answers.
	hc := apiTestClient(t, s)
	sess := openTestSession(t, hc, s)
	params := regexp.MustCompile(`\{[a-z]+\}`)
	for _, d := range documented {
		p := params.ReplaceAllStringFunc(d.path, func(name string) string {
			switch name {
			case "{path}":
				return "doc/x"
			case "{id}":
				return fmt.Sprint(sess.SessionID)
			case "{file}":
				return "console.js"
			}
			return "x"
		})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, d.method, "https://"+s.APIAddr()+p, strings.NewReader("{}"))
		req.Header.Set(hdrSession, sess.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			cancel()
			t.Errorf("%s %s: %v", d.method, p, err)
			continue
		}
		var body apiErrorBody
		if resp.Header.Get("Content-Type") == "application/json" && resp.StatusCode >= 400 {
			json.NewDecoder(resp.Body).Decode(&body)
		}
		resp.Body.Close()
		cancel()
		if body.Code == session.CodeNoRoute || body.Code == session.CodeMethodNotAllowed || resp.StatusCode >= 500 {
			t.Errorf("documented %s %s answers %d %+v", d.method, p, resp.StatusCode, body)
		}
	}
}

func openTestSession(t *testing.T, hc *http.Client, s *Server) apiSession {
	t.Helper()
	resp, err := hc.Post("https://"+s.APIAddr()+"/api/v1/sessions", "application/json", strings.NewReader(`{"ttl_ms":30000}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out apiSession
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 201 {
		t.Fatalf("open session: %d %v", resp.StatusCode, err)
	}
	return out
}

// FuzzAPIHandler sends arbitrary requests to a live member's API
// handler: whatever comes in, the answer is never a 5xx (a handler panic
// is answered 500 Internal by the guard, so this catches panics too) and
// every error body carries a code.
func FuzzAPIHandler(f *testing.F) {
	for _, seed := range []struct{ method, path, body, session string }{
		{"POST", "/api/v1/nodes/a", `{"data":"x"}`, ""},
		{"PUT", "/api/v1/nodes/a", `{"data_base64":"eA==","version":0}`, ""},
		{"POST", "/api/v1/multi", `{"ops":[{"op":"create","path":"/m"},{"op":"check","path":"/m","version":0}]}`, ""},
		{"POST", "/api/v1/txn", `{"if":[{"target":"value","path":"/m","cmp":"<","data":"x"},{"target":"exists","path":"/n","number":1}],"then":[{"op":"get","path":"/m"}],"else":[{"op":"create","path":"/n","data_base64":"eA=="}]}`, ""},
		{"POST", "/api/v1/locks/l/acquire", `{"client_id":"c","ttl_ms":1000,"wait_timeout_ms":10}`, ""},
		{"POST", "/api/v1/locks/l/release", `{"client_id":"c","fencing_token":3}`, ""},
		{"POST", "/api/v1/locks/l/renew", `{"fencing_token":3,"lease_token":"3.00ff","ttl_ms":5000}`, ""},
		{"POST", "/api/v1/elections/e/campaign", `{"data":"v"}`, "1.00"},
		{"GET", "/api/v1/children/?limit=1&after=a", "", ""},
		{"GET", "/api/v1/watch/?kind=recursive", "", ""},
		{"DELETE", "/api/v1/sessions/1", "", "1.abcd"},
		{"GET", "/api/v1/locks/l/queue", "", ""},
	} {
		f.Add(seed.method, seed.path, []byte(seed.body), seed.session)
	}
	s := startDev(f)
	h := s.api.handler()
	f.Fuzz(func(t *testing.T, method, path string, body []byte, tok string) {
		if !validMethod(method) || !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \r\n\t#") {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, "https://127.0.0.1"+path, bytes.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		if tok != "" && !strings.ContainsAny(tok, "\r\n") {
			req.Header.Set(hdrSession, tok)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable && rec.Code != http.StatusGatewayTimeout {
			t.Fatalf("%s %s %q: %d %s", method, path, body, rec.Code, rec.Body.String())
		}
		if rec.Code >= 400 {
			var e apiErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code == 0 {
				t.Fatalf("%s %s: error %d without a code: %q", method, path, rec.Code, rec.Body.String())
			}
		}
	})
}

func validMethod(m string) bool {
	switch m {
	case "GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS":
		return true
	}
	return false
}

// Event streams count against the identity's watches, the cap the QUIC
// front applies too: past it a watch is refused with 429 TooManyWatches,
// and a closed stream gives its slot back.
func TestAPIWatchCaps(t *testing.T) {
	s := startDev(t)
	s.cfg.MaxWatchesPerIdentity = 2 // read per request
	hc := apiTestClient(t, s)
	open := func() (*http.Response, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", "https://"+s.APIAddr()+"/api/v1/watch/", nil)
		resp, err := hc.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		return resp, cancel
	}
	var cancels []context.CancelFunc
	for i := 0; i < 2; i++ {
		resp, cancel := open()
		cancels = append(cancels, func() { cancel(); resp.Body.Close() })
		if resp.StatusCode != 200 {
			t.Fatalf("watch %d: %d", i, resp.StatusCode)
		}
	}
	resp, cancel := open()
	var body apiErrorBody
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	cancel()
	if resp.StatusCode != 429 || body.Code != session.CodeTooManyWatches {
		t.Fatalf("third watch: %d %+v", resp.StatusCode, body)
	}
	cancels[0]()
	waitCond(t, "a closed stream's slot comes back", func() error {
		resp, cancel := open()
		resp.Body.Close()
		cancel()
		if resp.StatusCode != 200 {
			return fmt.Errorf("watch: %d", resp.StatusCode)
		}
		return nil
	})
	cancels[1]()
}
