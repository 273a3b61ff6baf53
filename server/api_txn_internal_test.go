package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// POST /api/v1/txn: create if absent else read, a compare-and-set, and a
// failing branch that changes nothing, as JSON.
func TestAPITxn(t *testing.T) {
	s := startDev(t)
	hc := apiTestClient(t, s)
	post := func(body string, status int) map[string]any {
		t.Helper()
		resp, err := hc.Post("https://"+s.APIAddr()+"/api/v1/txn", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode != status {
			t.Fatalf("%s: %d %s (%v), want %d", body, resp.StatusCode, b, err, status)
		}
		return out
	}
	result := func(out map[string]any, i int) map[string]any {
		t.Helper()
		rs, _ := out["results"].([]any)
		if i >= len(rs) {
			t.Fatalf("no result %d in %v", i, out)
		}
		return rs[i].(map[string]any)
	}
	createOrGet := `{"if":[{"target":"exists","path":"/cfg","number":0}],
		"then":[{"op":"create","path":"/cfg","data":"blue"}],"else":[{"op":"get","path":"/cfg"}]}`
	if out := post(createOrGet, http.StatusOK); out["succeeded"] != true || result(out, 0)["path"] != "/cfg" {
		t.Fatalf("first create-or-get: %v", out)
	}
	out := post(createOrGet, http.StatusOK)
	if out["succeeded"] != false || result(out, 0)["data"] != "blue" || out["revision"] == nil {
		t.Fatalf("second create-or-get: %v", out)
	}
	cas := `{"if":[{"target":"value","path":"/cfg","cmp":"=","data":"blue"},{"target":"version","path":"/cfg","number":0}],
		"then":[{"op":"set","path":"/cfg","data":"green"},{"op":"get","path":"/cfg"}]}`
	out = post(cas, http.StatusOK)
	if out["succeeded"] != true || result(out, 1)["data"] != "green" || result(out, 1)["stat"].(map[string]any)["version"].(float64) != 1 {
		t.Fatalf("compare-and-set: %v", out)
	}
	if out := post(cas, http.StatusOK); out["succeeded"] != false || len(out["results"].([]any)) != 0 {
		t.Fatalf("stale compare-and-set: %v", out)
	}
	// The else branch fails in its second op: 409, nothing applied, the
	// failing op's result named.
	out = post(`{"if":[{"target":"value","path":"/cfg","data":"blue"}],
		"else":[{"op":"create","path":"/cfg/x"},{"op":"create","path":"/cfg"}]}`, http.StatusConflict)
	if out["name"] != "NodeExists" || out["succeeded"] != false || result(out, 1)["name"] != "NodeExists" || result(out, 0)["name"] != nil {
		t.Fatalf("failing txn: %v", out)
	}
	if _, _, err := s.store.Get("/cfg/x"); err == nil {
		t.Fatal("a failed txn created /cfg/x")
	}
	// Binary data travels as base64 both ways.
	post(`{"then":[{"op":"create","path":"/bin","data_base64":"/wA="}]}`, http.StatusOK)
	out = post(`{"if":[{"target":"value","path":"/bin","data_base64":"/wA="}],"then":[{"op":"get","path":"/bin"}]}`, http.StatusOK)
	if out["succeeded"] != true || result(out, 0)["data_base64"] != "/wA=" {
		t.Fatalf("binary compare and get: %v", out)
	}
}
