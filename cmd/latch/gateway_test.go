package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// gatewayRig is `latch gateway` processes in front of two cells (a, b)
// of three latchd each. Its client PKI (in <work>/latch-data/tls, as the
// README's curl walk-through expects next to latchd --dev) issues the
// gateways' server certificate and every client identity: callers', the
// cells' admin and the gateways' own on QUIC (members and gateways take
// it as --tls-client-ca). A second CA issues only the gateways'
// certificate toward members' APIs (--api-cert; members trust it with
// --api-gateway-ca).
type gatewayRig struct {
	cells   map[string]*proc.Cluster
	cellMap map[string][]string // every cell's endpoints
	pki     session.DevCerts
	work    string
	addr    string // the first gateway
	hc      *http.Client

	bin, mapFile, bundle, gwCert, gwKey, apiCert, apiKey string
}

// startGatewayRig starts the cells and one gateway whose map file names
// mapCells (default: both); it follows cell a's replicated map.
func startGatewayRig(t *testing.T, mapCells ...string) *gatewayRig {
	t.Helper()
	rig := &gatewayRig{cells: map[string]*proc.Cluster{}, cellMap: map[string][]string{}, work: t.TempDir()}
	var err error
	if rig.pki, err = session.EnsureDevCerts(filepath.Join(rig.work, "latch-data", "tls")); err != nil {
		t.Fatal(err)
	}
	if rig.gwCert, rig.gwKey, err = rig.pki.Client("latch-gateway"); err != nil {
		t.Fatal(err)
	}
	gwCA, err := session.EnsureDevCerts(filepath.Join(rig.work, "gateway-ca"))
	if err != nil {
		t.Fatal(err)
	}
	if rig.apiCert, rig.apiKey, err = gwCA.Client("gateway"); err != nil {
		t.Fatal(err)
	}
	var cas []byte
	for _, name := range []string{"a", "b"} {
		c := proc.StartClusterCerts(t, 3, func(_ session.DevCerts, _ int) []string {
			// Client certificates name identities; every identity may use
			// the namespace (the walk-through's callers are anonymous).
			return []string{"--cell", name, "--tls-client-ca", rig.pki.CA, "--acl-default", "allow", "--api-gateway-ca", gwCA.CA}
		})
		rig.cells[name] = c
		rig.cellMap[name] = c.ClientAddrs()
		b, err := os.ReadFile(c.Certs.CA)
		if err != nil {
			t.Fatal(err)
		}
		cas = append(cas, b...)
	}
	for _, c := range rig.cells {
		c.WaitLeader(t)
	}
	if len(mapCells) == 0 {
		mapCells = []string{"a", "b"}
	}
	fileMap := map[string][]string{}
	for _, name := range mapCells {
		fileMap[name] = rig.cellMap[name]
	}
	rig.bundle = filepath.Join(rig.work, "cells-ca.pem")
	rig.mapFile = filepath.Join(rig.work, "cells.json")
	js, _ := json.Marshal(map[string]any{"cells": fileMap})
	if err := os.WriteFile(rig.bundle, cas, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rig.mapFile, js, 0o600); err != nil {
		t.Fatal(err)
	}
	rig.bin = filepath.Join(t.TempDir(), "latch")
	if err := proc.GoBuild("./cmd/latch", rig.bin); err != nil {
		t.Fatal(err)
	}
	rig.hc = rig.client(t, "")
	rig.addr = rig.startGateway(t)
	return rig
}

// startGateway starts one more `latch gateway` process and returns its
// address once it answers.
func (rig *gatewayRig) startGateway(t *testing.T) string {
	t.Helper()
	addr := proc.FreeAddrs(t, 1)[0]
	var logs proc.Output
	cmd := exec.Command(rig.bin, "--cells", rig.mapFile, "--ca", rig.bundle, "--cert", rig.gwCert, "--key", rig.gwKey,
		"gateway", "--listen", addr, "--tls-cert", rig.pki.ServerCert, "--tls-key", rig.pki.ServerKey,
		"--api-cert", rig.apiCert, "--api-key", rig.apiKey, "--tls-client-ca", rig.pki.CA, "--map-cell", "a")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("gateway %s output:\n%s", addr, logs.String())
		}
	})
	proc.Eventually(t, "the gateway answers", func() error {
		select {
		case <-exited:
			t.Fatalf("the gateway exited (%v): %v\n%s", cmd.ProcessState, cmd.Args, logs.String())
		default:
		}
		resp, err := rig.hc.Get("https://" + addr + "/api/v1/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
	return addr
}

// client is an HTTPS client trusting the gateway, presenting the client
// certificate of identity (none for "").
func (rig *gatewayRig) client(t *testing.T, identity string) *http.Client {
	t.Helper()
	b, err := os.ReadFile(rig.pki.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	conf := &tls.Config{RootCAs: pool}
	if identity != "" {
		certFile, keyFile, err := rig.pki.Client(identity)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: conf, ForceAttemptHTTP2: true}}
	t.Cleanup(hc.CloseIdleConnections)
	return hc
}

// call sends a JSON request to the gateway and decodes the answer.
func (rig *gatewayRig) call(t *testing.T, hc *http.Client, method, path string, body any, hdr ...string) (int, map[string]any) {
	t.Helper()
	return rig.callAt(t, rig.addr, hc, method, path, body, hdr...)
}

// callAt is call to the gateway at addr.
func (rig *gatewayRig) callAt(t *testing.T, addr string, hc *http.Client, method, path string, body any, hdr ...string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "https://"+addr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range hdr {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(k, strings.TrimSpace(v))
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s %s: %d %q", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode, out
}

// The README's curl walk-through, run as written (JOBS=a/jobs and
// JOBS=b/jobs, at once) against a gateway in front of two cells while
// cell a's leader is killed: both watches see their lock's request node
// come and go, and every lock command succeeds. Then what the gateway
// itself decides: a multi over two cells is refused as client.Cells
// refuses it, sessions name their cell, and the caller's identity (its
// verified certificate, never a header it sends) is the one members
// record.
func TestGatewayREADMECurlWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed: the README's curl walk-through needs it")
	}
	watchScript, lockScript := proc.READMEBlock(t, "curl-walkthrough:watch", "sh"), proc.READMEBlock(t, "curl-walkthrough:lock", "sh")
	rig := startGatewayRig(t)

	type run struct {
		jobs              string
		dir               string
		watchOut, lockOut proc.Output
		watch             *exec.Cmd
	}
	shell := func(r *run, script string, out *proc.Output) *exec.Cmd {
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Dir, cmd.Stdout, cmd.Stderr = r.dir, out, out
		cmd.Env = append(os.Environ(), "API=https://"+rig.addr, "JOBS="+r.jobs)
		return cmd
	}
	waitOutput := func(what string, out *proc.Output, cond func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !cond(out.String()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not in the output:\n%s", what, out.String())
			}
			time.Sleep(10 * time.Millisecond) // polling the output with a deadline
		}
	}
	runs := []*run{{jobs: "a/jobs"}, {jobs: "b/jobs"}}
	for _, r := range runs {
		r.dir = t.TempDir() // each its own acquire.json
		if err := os.Symlink(filepath.Join(rig.work, "latch-data"), filepath.Join(r.dir, "latch-data")); err != nil {
			t.Fatal(err)
		}
		r.watch = shell(r, watchScript, &r.watchOut)
		if err := r.watch.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { r.watch.Process.Kill(); r.watch.Wait() }()
	}
	for _, r := range runs {
		waitOutput("the watch's ready event on "+r.jobs, &r.watchOut, func(s string) bool { return strings.Contains(s, "event: ready") })
	}

	// Kill cell a's leader: its watch (served by the leader the gateway
	// tried first) resumes elsewhere, its lock commands find the new one.
	a := rig.cells["a"]
	killed := a.WaitLeader(t)
	a.Nodes[killed].Kill(t)
	t.Logf("killed cell a's leader %s", a.Nodes[killed].ID)

	var wg sync.WaitGroup
	errs := make([]error, len(runs))
	for i, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = shell(r, lockScript, &r.lockOut).Run()
		}()
	}
	wg.Wait()
	for i, r := range runs {
		if errs[i] != nil {
			t.Fatalf("lock commands in %s: %v\n%s", r.jobs, errs[i], r.lockOut.String())
		}
		out := r.lockOut.String()
		for _, want := range []string{`"acquired": true`, `"fencing_token": `, `"expires_at": `, `"renewed": true`, `"new_expires_at": `, `"released": true`} {
			if !strings.Contains(out, want) {
				t.Fatalf("lock commands' output in %s lacks %s:\n%s", r.jobs, want, out)
			}
		}
		node := regexp.MustCompile(`"node": "([^"]+)"`).FindStringSubmatch(out)
		if node == nil || !strings.HasPrefix(node[1], "/"+r.jobs+"/nightly/") {
			t.Fatalf("no request node under /%s/nightly in:\n%s", r.jobs, out)
		}
		waitOutput("the lock's node created and deleted in "+r.jobs, &r.watchOut, func(s string) bool {
			return strings.Contains(s, `{"type":"created","path":"`+node[1]+`"`) && strings.Contains(s, `{"type":"deleted","path":"`+node[1]+`"`)
		})
		if n := strings.Count(r.watchOut.String(), `{"type":"created","path":"`+node[1]+`"`); n != 1 {
			t.Fatalf("the watch on %s saw the creation of %s %d times:\n%s", r.jobs, node[1], n, r.watchOut.String())
		}
	}

	// A multi over two cells is refused before anything is sent.
	code, e := rig.call(t, rig.hc, "POST", "/api/v1/multi", map[string]any{"ops": []map[string]any{
		{"op": "create", "path": "/a/m1"}, {"op": "create", "path": "/b/m1"},
	}})
	if code != 400 || !strings.Contains(fmt.Sprint(e["message"]), "the request spans cells") {
		t.Fatalf("cross-cell multi: %d %v", code, e)
	}
	for _, p := range []string{"a/m1", "b/m1"} {
		if code, _ := rig.call(t, rig.hc, "GET", "/api/v1/stat/"+p, nil); code != 404 {
			t.Fatalf("a refused multi created /%s (%d)", p, code)
		}
	}
	if code, e := rig.call(t, rig.hc, "GET", "/api/v1/watch/?kind=recursive", nil); code != 400 || !strings.Contains(fmt.Sprint(e["message"]), "spans cells") {
		t.Fatalf("watch on /: %d %v", code, e)
	}
	if code, e := rig.call(t, rig.hc, "GET", "/api/v1/children/", nil); code != 200 || fmt.Sprint(e["children"]) != "[a b]" {
		t.Fatalf("children of /: %d %v", code, e)
	}

	// A session in cell b, opened by a caller with a certificate that
	// also sends a forged identity header: the token names cell b, an
	// ephemeral node lives in b, and b records the certificate's identity.
	alice := rig.client(t, "alice")
	code, s := rig.call(t, alice, "POST", "/api/v1/sessions?cell=b", map[string]any{"ttl_ms": 10000}, "Latch-Identity: root")
	tok, _ := s["token"].(string)
	if code != 201 || !strings.HasPrefix(tok, "b/") {
		t.Fatalf("session through the gateway: %d %v", code, s)
	}
	if code, e := rig.call(t, alice, "POST", "/api/v1/nodes/b/eph", map[string]any{"ephemeral": true}, "Latch-Session: "+tok); code != 201 {
		t.Fatalf("ephemeral in b with b's session: %d %v", code, e)
	}
	if code, e := rig.call(t, alice, "POST", "/api/v1/nodes/a/eph", map[string]any{"ephemeral": true}, "Latch-Session: "+tok); code != 421 {
		t.Fatalf("a node in a with b's session: %d %v, want 421", code, e)
	}
	_, list := rig.call(t, alice, "GET", "/api/v1/sessions?cell=b", nil)
	identity := ""
	for _, x := range list["sessions"].([]any) {
		if x := x.(map[string]any); fmt.Sprint(x["id"]) == fmt.Sprint(s["session_id"]) {
			identity = fmt.Sprint(x["identity"])
		}
	}
	if identity != "alice" {
		t.Fatalf("the session opened through the gateway has identity %q, want alice", identity)
	}
	checkGatewayGuard(t, rig)
	_, anon := rig.call(t, rig.hc, "POST", "/api/v1/sessions?cell=a", map[string]any{"ttl_ms": 10000}, "Latch-Identity: root")
	_, list = rig.call(t, rig.hc, "GET", "/api/v1/sessions?cell=a", nil)
	for _, x := range list["sessions"].([]any) {
		if x := x.(map[string]any); fmt.Sprint(x["id"]) == fmt.Sprint(anon["session_id"]) && x["identity"] != "" {
			t.Fatalf("a caller without a certificate got identity %v from its own header", x["identity"])
		}
	}
}

// checkGatewayGuard: the gateway refuses what a hostile page can make a
// browser send, as members do (a foreign Host, a cross-site POST).
func checkGatewayGuard(t *testing.T, rig *gatewayRig) {
	t.Helper()
	req, _ := http.NewRequest("GET", "https://"+rig.addr+"/api/v1/nodes/a", nil)
	req.Host = "evil.example"
	resp, err := rig.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("GET with Host evil.example: %d, want 403", resp.StatusCode)
	}
	code, e := rig.call(t, rig.hc, "POST", "/api/v1/nodes/a/xsite", map[string]any{}, "Origin: https://evil.example")
	if code != http.StatusForbidden {
		t.Fatalf("cross-origin POST: %d %v, want 403", code, e)
	}
	if code, _ := rig.call(t, rig.hc, "GET", "/api/v1/stat/a/xsite", nil); code != 404 {
		t.Fatalf("a refused cross-origin POST created /a/xsite (%d)", code)
	}
}

// The console through the gateway, in headless Chromium: the tree's root
// lists both cells and the cluster view shows both cells' members and a
// lock of each.
func TestGatewayConsoleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes and a browser")
	}
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			browser = p
			break
		}
	}
	if browser == "" {
		t.Skip("no Chromium found on PATH (chromium, chromium-browser, google-chrome): the gateway console test needs one")
	}
	rig := startGatewayRig(t)
	for _, cell := range []string{"a", "b"} {
		code, g := rig.call(t, rig.hc, "POST", "/api/v1/locks/"+cell+"/report/acquire",
			map[string]any{"client_id": "worker-" + cell, "ttl_ms": 60000, "wait_timeout_ms": 5000})
		if code != 200 || g["acquired"] != true {
			t.Fatalf("lock in %s: %d %v", cell, code, g)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(browser), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("ignore-certificate-errors", true), // the gateway's dev CA is not the browser's
		chromedp.UserDataDir(t.TempDir()),
	)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	wants := []string{
		`#tree li[data-path="/a"]`, `#tree li[data-path="/b"]`,
		`#members tr[data-member="a/n1"]`, `#members tr[data-member="b/n3"]`,
		`#locks .queue[data-lock="/a/report"]`, `#locks .queue[data-lock="/b/report"]`,
	}
	if err := chromedp.Do(bctx, chromedp.Navigate("https://"+rig.addr+"/")); err != nil {
		t.Fatal(err)
	}
	for _, sel := range wants {
		wctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		err := chromedp.Do(wctx, chromedp.WaitVisible(chromedp.CSS(sel)))
		cancel()
		if err != nil {
			html, _ := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("main")))
			t.Fatalf("the console through the gateway shows no %s: %v\n%s", sel, err, html)
		}
	}
	holders, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#locks")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(holders, "worker-a") || !strings.Contains(holders, "worker-b") {
		t.Fatalf("the lock view lacks a holder: %q", holders)
	}
}

// A gateway follows the replicated cell map: started with a map that
// lacks cell b, it refuses b's paths (421) until an admin publishes a map
// with b in map cell a, then serves them; and a second gateway beside it
// serves a session the first one opened (the token names its cell, no
// gateway remembers it).
func TestGatewayFollowsMapSideBySide(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	rig := startGatewayRig(t, "a")
	if code, e := rig.call(t, rig.hc, "POST", "/api/v1/nodes/b/x", map[string]any{}); code != 421 {
		t.Fatalf("a cell missing from the map: %d %v, want 421", code, e)
	}

	a := rig.cells["a"]
	certFile, keyFile, err := rig.pki.Client(proc.AdminName)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := session.ClientTLS(a.Certs.CA, certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := client.Dial(ctx, client.Config{Endpoints: a.ClientAddrs(), TLS: conf})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := client.PublishCellMap(ctx, admin, "a", client.CellMap(rig.cellMap)); err != nil {
		t.Fatal(err)
	}
	proc.Eventually(t, "the gateway routes cell b after the map changed", func() error {
		if code, e := rig.call(t, rig.hc, "POST", "/api/v1/nodes/b/x", map[string]any{}); code != 201 {
			return fmt.Errorf("create /b/x: %d %v", code, e)
		}
		return nil
	})

	second := rig.startGateway(t)
	code, s := rig.call(t, rig.hc, "POST", "/api/v1/sessions?cell=b", map[string]any{"ttl_ms": 10000})
	tok, _ := s["token"].(string)
	if code != 201 || !strings.HasPrefix(tok, "b/") {
		t.Fatalf("session: %d %v", code, s)
	}
	if code, e := rig.callAt(t, second, rig.hc, "POST", "/api/v1/nodes/b/x/eph", map[string]any{"ephemeral": true}, "Latch-Session: "+tok); code != 201 {
		t.Fatalf("the second gateway with the first one's session: %d %v", code, e)
	}
	if code, e := rig.callAt(t, second, rig.hc, "DELETE", "/api/v1/sessions/"+fmt.Sprint(s["session_id"]), nil, "Latch-Session: "+tok); code != 200 {
		t.Fatalf("closing the session through the second gateway: %d %v", code, e)
	}
	if code, _ := rig.call(t, rig.hc, "GET", "/api/v1/stat/b/x/eph", nil); code != 404 {
		t.Fatalf("the session's ephemeral outlived its close (%d)", code)
	}
}
