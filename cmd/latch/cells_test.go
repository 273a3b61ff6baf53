package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latch-io/latch/server/proc"
)

// TestCellsCLI runs the CLI with --cells (from LATCH_CELLS) against two
// cells of one latchd each: every command goes to the cell of its path,
// a path of no cell is refused, status shows both cells, a command that
// names no path is a usage error, and cells publish writes the
// replicated map into the map cell (only an admin may: clients without
// a certificate are made admins of cell a here).
func TestCellsCLI(t *testing.T) {
	a := proc.StartCluster(t, 1, "--cell", "a", "--admins", proc.AdminName+`,""`)
	b := proc.StartCluster(t, 1, "--cell", "b")
	a.WaitLeader(t)
	b.WaitLeader(t)
	dir := t.TempDir()
	var bundle []byte
	for _, ca := range []string{a.Certs.CA, b.Certs.CA} {
		pem, err := os.ReadFile(ca)
		if err != nil {
			t.Fatal(err)
		}
		bundle = append(bundle, pem...)
	}
	caFile := filepath.Join(dir, "ca.pem")
	mapFile := filepath.Join(dir, "cells.json")
	m := `{"cells": {"a": ["` + a.Nodes[0].ClientAddr + `"], "b": ["` + b.Nodes[0].ClientAddr + `"]}}`
	if err := os.WriteFile(caFile, bundle, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mapFile, []byte(m), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LATCH_CA", caFile)
	t.Setenv("LATCH_CELLS", mapFile)
	t.Setenv("LATCH_ENDPOINTS", "127.0.0.1:1") // never used with --cells

	ok := func(args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(args...)
		if code != 0 {
			t.Fatalf("latch %v: exit %d: %s", args, code, errOut)
		}
		return out
	}
	ok("create", "/a/x", "in-a")
	ok("create", "/b/x", "in-b")
	if out := ok("get", "/a/x"); !strings.Contains(out, "in-a") {
		t.Fatalf("get /a/x: %q", out)
	}
	if out := ok("get", "/b/x"); !strings.Contains(out, "in-b") {
		t.Fatalf("get /b/x: %q", out)
	}
	if code, _, errOut := runCLI("get", "/"); code != 1 || !strings.Contains(errOut, "belongs to no cell") {
		t.Fatalf("get /: exit %d: %s", code, errOut)
	}
	if code, _, errOut := runCLI("members"); code != 1 || !strings.Contains(errOut, "names no path") {
		t.Fatalf("members with --cells: exit %d: %s", code, errOut)
	}

	out := ok("status")
	for _, want := range []string{"== cell a", "== cell b"} {
		if !strings.Contains(out, want) {
			t.Fatalf("status lacks %q:\n%s", want, out)
		}
	}
	var doc struct {
		Cells map[string]struct {
			Leader string `json:"leader"`
		} `json:"cells"`
	}
	if err := json.Unmarshal([]byte(ok("status", "-o", "json")), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Cells) != 2 || doc.Cells["a"].Leader == "" || doc.Cells["b"].Leader == "" {
		t.Fatalf("status -o json: %+v", doc)
	}

	ok("cells", "publish", "a")
	if out := ok("get", "/a/latch-cellmap"); !strings.Contains(out, b.Nodes[0].ClientAddr) {
		t.Fatalf("the published map: %q", out)
	}
}
