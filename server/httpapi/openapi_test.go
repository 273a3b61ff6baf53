package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/latch-io/latch/server/apispec"
)

// Every route the API serves is in the OpenAPI document: some documented
// path of its method matches its pattern. (That every documented
// operation answers on a live member is server's TestAPIOpenAPI.)
func TestAPIOpenAPIRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(apispec.Document, &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("openapi.json: %v (version %q)", err, doc.OpenAPI)
	}
	routes := (&API{}).routeTable()
	if len(routes) == 0 {
		t.Fatal("no routes")
	}
	for _, rt := range routes {
		pat := strings.ReplaceAll(strings.TrimSuffix(rt.pattern, "{$}"), "{path...}", "{path}")
		found := false
		for p, ops := range doc.Paths {
			if _, ok := ops[strings.ToLower(rt.method)]; ok && (p == pat || strings.HasPrefix(p, pat+"/")) {
				found = true
			}
		}
		if !found {
			t.Errorf("route %s %s is not in openapi.json", rt.method, rt.pattern)
		}
	}
}
