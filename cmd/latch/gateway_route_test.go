package main

import (
	"crypto/tls"
	"errors"
	"testing"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/session"
)

// bodyCell finds the one cell of a body's paths and refuses two, as
// client.Cells.Multi does.
func TestGatewayBodyCell(t *testing.T) {
	for _, tc := range []struct {
		body string
		cell string
		err  error
	}{
		{`{"ops": [{"op": "create", "path": "/a/x"}, {"op": "check", "path": "/a/y", "version": 1}]}`, "a", nil},
		{`{"ops": [{"op": "create", "path": "/a/x"}, {"op": "create", "path": "/b/x"}]}`, "", client.ErrCrossCell},
		{`{"compare": [{"path": "/b/k"}], "then": [{"op": "get", "path": "/b/k"}], "else": [{"op": "set", "path": "/c/k"}]}`, "", client.ErrCrossCell},
		{`{"ops": [{"op": "create", "path": "/"}]}`, "", session.ErrWrongCell},
		{`{"ttl_ms": 1000}`, "", nil},
		{`not json`, "", nil},
	} {
		cell, err := bodyCell([]byte(tc.body))
		if cell != tc.cell || (tc.err == nil) != (err == nil) || (tc.err != nil && !errors.Is(err, tc.err)) {
			t.Errorf("bodyCell(%s) = %q, %v; want %q, %v", tc.body, cell, err, tc.cell, tc.err)
		}
	}
}

// The gateway answers only to its own names (DNS rebinding).
func TestGatewayHosts(t *testing.T) {
	ok := gatewayHosts("127.0.0.1:7424", tls.Certificate{}, []string{"gw.example"})
	for host, want := range map[string]bool{
		"127.0.0.1:7424": true, "localhost": true, "[::1]:7424": true, "gw.example": true, "GW.example.": true,
		"evil.example": false, "10.0.0.1": false,
	} {
		if ok(host) != want {
			t.Errorf("Host %q allowed: %v, want %v", host, !want, want)
		}
	}
	if any := gatewayHosts("0.0.0.0:7424", tls.Certificate{}, nil); !any("10.0.0.1:7424") || any("evil.example") {
		t.Error("listening on every address: any IP, and no other name, is the gateway")
	}
	if star := gatewayHosts("127.0.0.1:7424", tls.Certificate{}, []string{"*"}); !star("evil.example") {
		t.Error(`--hosts "*" turns the check off`)
	}
}
