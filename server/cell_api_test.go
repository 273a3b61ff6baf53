package server_test

import (
	"strings"
	"testing"

	"github.com/latch-io/latch/server/proc"
)

// TestAPICellRefusesOtherPaths: a latchd --cell a answers the HTTP API's
// requests for paths outside /a with 421 WrongCell naming the right cell
// (in the route's path, in a multi's ops, in a txn's compares and ops),
// and serves /a as before.
func TestAPICellRefusesOtherPaths(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := proc.StartCluster(t, 1, "--cell", "a")
	c.WaitLeader(t)
	api := newAPIClient(t, c.Certs.CA)
	f := c.Nodes[0].APIAddr

	api.do(201, f, "POST", "/api/v1/nodes/a/x", map[string]any{"data": "v"})
	api.do(200, f, "GET", "/api/v1/nodes/a/x", nil)
	api.do(200, f, "GET", "/api/v1/children/a", nil)

	refused := func(method, path string, body any, cell string) {
		t.Helper()
		e := api.do(421, f, method, path, body)
		if e.str("name") != "WrongCell" || !strings.Contains(e.str("message"), cell) {
			t.Fatalf("%s %s: %v", method, path, e)
		}
	}
	refused("POST", "/api/v1/nodes/b/x", nil, `cell "b"`)
	refused("GET", "/api/v1/nodes/b/x", nil, `cell "b"`)
	refused("GET", "/api/v1/children/", nil, "belongs to no cell")
	refused("POST", "/api/v1/locks/b/l/acquire", map[string]any{"client_id": "c", "ttl_ms": 5000}, `/b/l belongs to cell "b"`)
	refused("POST", "/api/v1/locks/acquire", map[string]any{"client_id": "c", "ttl_ms": 5000}, "/ belongs to no cell")
	refused("GET", "/api/v1/watch/?kind=recursive", nil, "belongs to no cell")
	refused("POST", "/api/v1/multi", map[string]any{"ops": []map[string]any{
		{"op": "create", "path": "/a/m"}, {"op": "create", "path": "/b/m"}}}, `cell "b"`)
	refused("POST", "/api/v1/txn", map[string]any{"if": []map[string]any{{"target": "exists", "path": "/b/m"}},
		"then": []map[string]any{{"op": "create", "path": "/a/m"}}}, `cell "b"`)
	refused("POST", "/api/v1/txn", map[string]any{"then": []map[string]any{{"op": "create", "path": "/a/m"}},
		"else": []map[string]any{{"op": "get", "path": "/b/m"}}}, `cell "b"`)
	api.do(404, f, "GET", "/api/v1/nodes/a/m", nil) // the refused multi and txns applied nothing
	api.do(200, f, "POST", "/api/v1/txn", map[string]any{"if": []map[string]any{{"target": "exists", "path": "/a/x", "number": 1}},
		"then": []map[string]any{{"op": "get", "path": "/a/x"}}})
}
