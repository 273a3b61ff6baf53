package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// An HTTP acquire waiting in the queue whose request context ends is a
// caller that gave up: the acquisition engine withdraws its request (a
// session's waiter: the session lives on without it) and an implicit
// lease ends, so neither holds the lock when the holder releases it.
func TestAPILockWaiterGoneIsWithdrawn(t *testing.T) {
	s := startDev(t)
	h := s.api.handler()
	do := func(ctx context.Context, path, token, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(ctx, "POST", "https://127.0.0.1"+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set(hdrSession, token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := do(context.Background(), "/api/v1/nodes/l", "", `{}`); rec.Code != http.StatusCreated {
		t.Fatalf("create /l: %d %s", rec.Code, rec.Body)
	}
	var sess apiSession
	rec := do(context.Background(), "/api/v1/sessions", "", `{"ttl_ms":30000}`)
	if err := json.Unmarshal(rec.Body.Bytes(), &sess); err != nil || rec.Code != http.StatusCreated {
		t.Fatalf("open session: %d %s", rec.Code, rec.Body)
	}
	rec = do(context.Background(), "/api/v1/locks/l/acquire", "", `{"client_id":"holder","ttl_ms":30000}`)
	var held struct {
		Acquired     bool   `json:"acquired"`
		FencingToken uint64 `json:"fencing_token"`
		LeaseToken   string `json:"lease_token"`
		Session      uint64 `json:"session_id"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &held); err != nil || !held.Acquired {
		t.Fatalf("holder's acquire: %d %s", rec.Code, rec.Body)
	}
	queue := func() (n int, waiter uint64) {
		q, err := s.store.LockQueue("/l")
		if err != nil {
			t.Fatal(err)
		}
		for _, li := range q {
			if li.Session != held.Session {
				waiter = li.Session
			}
		}
		return len(q), waiter
	}

	for _, token := range []string{sess.Token, ""} { // a session's waiter, an implicit lease's
		ctx, cancel := context.WithCancel(context.Background())
		answered := make(chan *httptest.ResponseRecorder, 1)
		go func() {
			answered <- do(ctx, "/api/v1/locks/l/acquire", token, `{"client_id":"waiter","ttl_ms":30000,"wait_timeout_ms":60000}`)
		}()
		var waiter uint64
		for deadline := time.Now().Add(20 * time.Second); waiter == 0; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the waiter's request never reached the queue")
			}
			_, waiter = queue()
		}
		cancel() // the client goes away
		select {
		case <-answered:
		case <-time.After(20 * time.Second):
			t.Fatal("the long poll did not end with its request context")
		}
		if n, w := queue(); n != 1 || w != 0 {
			t.Fatalf("after the waiter left, the queue of /l has %d requests (waiter's session %d), want the holder's only", n, w)
		}
		_, err := s.store.Session(waiter)
		if explicit := token != ""; explicit != (err == nil) {
			t.Errorf("waiter's session %d (explicit %v) after its request was withdrawn: %v", waiter, explicit, err)
		}
	}
	rec = do(context.Background(), "/api/v1/locks/l/release", "",
		fmt.Sprintf(`{"fencing_token":%d,"lease_token":%q}`, held.FencingToken, held.LeaseToken))
	if rec.Code != http.StatusOK {
		t.Fatalf("release: %d %s", rec.Code, rec.Body)
	}
	if n, _ := queue(); n != 0 {
		t.Fatalf("after the release the queue of /l has %d requests: a gone waiter was granted", n)
	}
}
