package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The client and the CLI link the protocol, not the member: no raft, no
// badger, no server package but the leaf packages of vocabulary and
// process control that import no server internals.
const module = "github.com/latch-io/latch"

// serverLeaves are the server/... packages the CLI may link: each imports
// nothing of the member (a package that did would bring the member into
// the list and fail the check).
var serverLeaves = []string{
	module + "/server/adminapi", // the admin endpoint's types and client
	module + "/server/apiwire",  // the HTTP API's headers, errors and guard
	module + "/server/apispec",  // the OpenAPI document
	module + "/server/console",  // the web console's files
	module + "/server/proc",     // latchd processes for bench and chaos
}

// forbiddenDeps returns the packages of deps the client and the CLI must
// not link.
func forbiddenDeps(deps []string) []string {
	var bad []string
	for _, p := range deps {
		switch {
		case p == module+"/server",
			strings.HasPrefix(p, module+"/server/") && !slices.Contains(serverLeaves, p),
			p == module+"/namespace/store" || strings.HasPrefix(p, module+"/namespace/store/"),
			strings.HasPrefix(p, "github.com/hashicorp/raft"),
			strings.HasPrefix(p, "github.com/dgraph-io/"):
			bad = append(bad, p)
		}
	}
	return bad
}

func TestForbiddenDeps(t *testing.T) {
	ok := []string{"fmt", module + "/client", module + "/session", module + "/namespace", module + "/server/apiwire", module + "/server/proc"}
	if bad := forbiddenDeps(ok); len(bad) != 0 {
		t.Errorf("forbiddenDeps(%v) = %v, want none", ok, bad)
	}
	for _, p := range []string{
		module + "/server",
		module + "/server/raftstore",
		module + "/namespace/store",
		"github.com/hashicorp/raft",
		"github.com/hashicorp/raft-wal/metadb",
		"github.com/dgraph-io/badger/v4",
		"github.com/dgraph-io/ristretto/v2",
	} {
		if bad := forbiddenDeps(append(slices.Clone(ok), p)); !slices.Equal(bad, []string{p}) {
			t.Errorf("forbiddenDeps with %s = %v, want [%s]", p, bad, p)
		}
	}
}

// TestCLIDeps runs go list on the client and the CLI and fails on any
// package forbiddenDeps names.
func TestCLIDeps(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not on PATH: cannot list the CLI's dependencies")
	}
	out, err := exec.Command(gobin, "list", "-deps", module+"/client", module+"/cmd/latch").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, module+"/client") {
		t.Fatalf("go list -deps names no %s/client: %q", module, out)
	}
	if bad := forbiddenDeps(deps); len(bad) != 0 {
		t.Errorf("the client and the CLI link packages of the member:\n  %s\nfind the importer with: go list -f '{{.ImportPath}}: {{.Imports}}' -deps ./cmd/latch", strings.Join(bad, "\n  "))
	}
}
