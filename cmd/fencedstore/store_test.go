package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

func post(t *testing.T, h http.Handler, path string, a attempt) (int, Record) {
	t.Helper()
	body, _ := json.Marshal(a)
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, httptest.NewRequest("POST", path, bytes.NewReader(body)))
	var rec Record
	if rr.Code == http.StatusOK || rr.Code == http.StatusConflict {
		if err := json.Unmarshal(rr.Body.Bytes(), &rec); err != nil {
			t.Fatalf("%s: bad body %q: %v", path, rr.Body.String(), err)
		}
	}
	return rr.Code, rec
}

func TestFencing(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "j.jsonl")
	st, err := OpenStore(journal, false)
	if err != nil {
		t.Fatal(err)
	}
	h := Handler(st)
	steps := []struct {
		path  string
		a     attempt
		code  int
		data  string
		label string
	}{
		{"/write", attempt{"k", 5, "a", "1"}, 200, "", "first write"},
		{"/write", attempt{"k", 5, "a", "2"}, 200, "", "same token again"},
		{"/write", attempt{"k", 4, "old", "x"}, 409, "", "older token rejected"},
		{"/read", attempt{"k", 7, "b", ""}, 200, "2", "newer holder reads and fences"},
		{"/write", attempt{"k", 5, "a", "3"}, 409, "", "old holder fenced by a read"},
		{"/write", attempt{"other", 1, "c", "z"}, 200, "", "keys are independent"},
		{"/write", attempt{"", 9, "c", "z"}, 400, "", "missing key"},
	}
	for _, s := range steps {
		code, rec := post(t, h, s.path, s.a)
		if code != s.code {
			t.Fatalf("%s: code %d, want %d", s.label, code, s.code)
		}
		if s.data != "" && rec.Data != s.data {
			t.Fatalf("%s: data %q, want %q", s.label, rec.Data, s.data)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// The journal replays: the highest token survives a restart.
	st2, err := OpenStore(journal, false)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	if code, _ := post(t, Handler(st2), "/write", attempt{"k", 6, "late", "x"}); code != 409 {
		t.Fatalf("after restart a token below the highest read was accepted (code %d)", code)
	}
	rr := httptest.NewRecorder()
	Handler(st2).ServeHTTP(rr, httptest.NewRequest("GET", "/history", nil))
	if n := strings.Count(rr.Body.String(), "\n"); n != 7 {
		t.Fatalf("history has %d records, want 7 (6 decided before restart + 1 after):\n%s", n, rr.Body.String())
	}
}

func TestIgnoreTokensAcceptsStale(t *testing.T) {
	st, err := OpenStore(filepath.Join(t.TempDir(), "j.jsonl"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h := Handler(st)
	post(t, h, "/write", attempt{"k", 9, "a", "1"})
	if code, _ := post(t, h, "/write", attempt{"k", 1, "b", "2"}); code != 200 {
		t.Fatalf("--ignore-tokens store rejected a stale write (code %d)", code)
	}
}
