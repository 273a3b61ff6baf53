package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/apispec"
	"github.com/latch-io/latch/server/apiwire"
	"github.com/latch-io/latch/server/console"
	"github.com/latch-io/latch/session"
)

// gateway routes API requests to the cells of a cell map (gateway.go).
type gateway struct {
	x         *client.Cells
	fwd       *http.Client
	callerCAs *x509.CertPool
	log       *slog.Logger
	hostOK    func(host string) bool // the Host check (gatewayHosts); set by serve

	mu   sync.Mutex
	apis map[string][]string // cell -> member API addresses, leader first

	clusterStreams atomic.Int64 // merged cluster streams open (each polls every cell)
}

// gatewayTimeout bounds how long one request looks for a member of its
// cell that acts on it (a member itself waits through an election).
const gatewayTimeout = 15 * time.Second

// maxGatewayBody bounds a request body (a member's frame limit).
const maxGatewayBody = 1<<20 + 64<<10

func newGateway(ctx context.Context, cfg gatewayConfig) (*gateway, error) {
	cas, err := loadCallerCAs(cfg.ClientCA)
	if err != nil {
		return nil, err
	}
	x, err := client.DialCells(ctx, client.CellsConfig{Config: cfg.Client, Map: cfg.Map, MapCell: cfg.MapCell})
	if err != nil {
		return nil, err
	}
	fwdTLS := cfg.Client.TLS.Clone()
	fwdTLS.NextProtos = []string{"h2", "http/1.1"}
	fwdTLS.ServerName = ""
	fwdTLS.ClientSessionCache = nil // QUIC's tickets are not the API's
	if len(cfg.APICerts) > 0 {
		fwdTLS.Certificates = cfg.APICerts
	}
	g := &gateway{x: x, callerCAs: cas, log: cfg.Logger, apis: map[string][]string{}}
	if g.log == nil {
		g.log = slog.Default()
	}
	g.fwd = apiwire.ForwardClient(fwdTLS)
	return g, nil
}

// Close ends the gateway's cell clients and idle connections.
func (g *gateway) Close() {
	g.x.Close()
	g.fwd.CloseIdleConnections()
}

// memberAPIs returns cell's member API addresses, leader first, from the
// cache unless refresh; the list comes from the cell's member list
// (stale: any member answers during an election).
func (g *gateway) memberAPIs(ctx context.Context, cell string, refresh bool) ([]string, error) {
	g.mu.Lock()
	addrs, ok := g.apis[cell]
	g.mu.Unlock()
	if ok && !refresh {
		return addrs, nil
	}
	if _, in := g.x.Map()[cell]; !in {
		return nil, fmt.Errorf("%w: cell %q is not in the cell map", session.ErrWrongCell, cell)
	}
	c, err := g.x.Client(ctx, "/"+cell)
	if err != nil {
		return addrs, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ms, err := c.Members(ctx, client.Stale())
	if err != nil {
		return addrs, err
	}
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].Leader && !ms[j].Leader })
	addrs = addrs[:0:0]
	for _, m := range ms {
		if m.APIAddr != "" {
			addrs = append(addrs, m.APIAddr)
		}
	}
	g.mu.Lock()
	g.apis[cell] = addrs
	g.mu.Unlock()
	return addrs, nil
}

// pathRoutes are the API routes whose path after the prefix names a
// namespace path; lockish ones may end in an action.
var pathRoutes = []struct {
	prefix  string
	lockish bool
}{
	{"/api/v1/nodes/", false}, {"/api/v1/children/", false}, {"/api/v1/stat/", false},
	{"/api/v1/watch/", false}, {"/api/v1/locks/", true}, {"/api/v1/elections/", true},
}

// ServeHTTP routes one request.
func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !apiwire.Guard(w, r, g.hostOK) {
		return
	}
	p := r.URL.Path
	switch {
	case p == "/" || strings.HasPrefix(p, "/console/"):
		if r.Method != http.MethodGet {
			apiwire.WriteError(w, fmt.Errorf("%w: %s %s", session.ErrMethodNotAllowed, r.Method, p))
			return
		}
		b, ct, ok := console.File(strings.TrimPrefix(strings.TrimPrefix(p, "/"), "console/"))
		if !ok {
			apiwire.WriteError(w, fmt.Errorf("%w: %s", session.ErrNoRoute, p))
			return
		}
		w.Header().Set("Content-Type", ct)
		w.Header().Set("Cache-Control", "no-cache")
		w.Write(b)
		return
	case p == "/api/v1/openapi.json":
		w.Header().Set("Content-Type", "application/json")
		w.Write(apispec.Document)
		return
	case p == "/api/v1/health":
		apiwire.WriteJSON(w, http.StatusOK, map[string]any{"ready": true, "gateway": true, "cells": slices.Sorted(maps.Keys(g.x.Map()))})
		return
	case r.URL.Query().Get("cell") == "" && r.Method == http.MethodGet && (p == "/api/v1/cluster" || p == "/api/v1/locks" || p == "/api/v1/members"):
		g.merged(w, r, p)
		return
	case r.URL.Query().Get("cell") == "" && p == "/api/v1/cluster/events":
		g.clusterEvents(w, r)
		return
	case !strings.HasPrefix(p, "/api/v1/"):
		apiwire.WriteError(w, fmt.Errorf("%w: %s %s", session.ErrNoRoute, r.Method, p))
		return
	case p == "/api/v1/children/" && r.Method == http.MethodGet:
		// The children of / are the cells (as client.Cells answers).
		apiwire.WriteJSON(w, http.StatusOK, map[string]any{"path": "/", "children": slices.Sorted(maps.Keys(g.x.Map())), "more": false})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxGatewayBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			err = fmt.Errorf("%w: request body over %d bytes", session.ErrFrameTooLarge, tooBig.Limit)
		} else {
			err = fmt.Errorf("%w: reading request body: %v", session.ErrMalformed, err)
		}
		apiwire.WriteError(w, err)
		return
	}
	cell, token, err := g.route(r, body)
	if err != nil {
		apiwire.WriteError(w, err)
		return
	}
	g.forward(w, r, cell, body, token)
}

// route finds the cell of r and the session token to pass on (without
// its cell).
func (g *gateway) route(r *http.Request, body []byte) (cell, token string, err error) {
	token = r.Header.Get(apiwire.HeaderSession)
	tokenCell := ""
	if c, t, ok := strings.Cut(token, "/"); ok {
		tokenCell, token = c, t
	}
	for _, rt := range pathRoutes {
		rest, ok := strings.CutPrefix(r.URL.Path, rt.prefix)
		if !ok {
			continue
		}
		first, _, more := strings.Cut(rest, "/")
		if rest == "" || (rt.lockish && r.Method == http.MethodPost && !more) {
			if rt.prefix == "/api/v1/watch/" {
				return "", "", fmt.Errorf("%w: %w: a watch on / covers every cell; watch /CELL in each cell", namespace.ErrBadCommand, client.ErrCrossCell)
			}
			return "", "", fmt.Errorf("%w: / belongs to no cell: use a path under /CELL/", session.ErrWrongCell)
		}
		cell = first
	}
	if cell == "" && r.Method != http.MethodGet && len(bytes.TrimSpace(body)) > 0 {
		if cell, err = bodyCell(body); err != nil {
			return "", "", err
		}
	}
	if cell == "" {
		cell = r.URL.Query().Get("cell")
	}
	if cell == "" {
		cell = tokenCell
	}
	switch {
	case cell == "":
		return "", "", fmt.Errorf("%w: %w: %s %s names no path: add ?cell=NAME (cells: %s)", namespace.ErrBadCommand, errNoCell, r.Method, r.URL.Path,
			strings.Join(slices.Sorted(maps.Keys(g.x.Map())), ", "))
	case tokenCell != "" && tokenCell != cell:
		return "", "", fmt.Errorf("%w: the session is one of cell %q, the request is for cell %q", session.ErrWrongCell, tokenCell, cell)
	}
	if _, ok := g.x.Map()[cell]; !ok {
		return "", "", fmt.Errorf("%w: cell %q is not in the cell map", session.ErrWrongCell, cell)
	}
	return cell, token, nil
}

// bodyCell is the one cell of every "path" a JSON body names (a multi's
// or a txn's ops), "" when it names none; paths of two cells are refused
// as client.Cells.Multi refuses them.
func bodyCell(body []byte) (string, error) {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return "", nil // the member names the error
	}
	var paths []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "path" {
					paths = append(paths, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	sort.Strings(paths)
	cell := ""
	for i, p := range paths {
		c := session.CellOf(p)
		if c == "" {
			return "", fmt.Errorf("%w: %s belongs to no cell: use a path under /CELL/", session.ErrWrongCell, p)
		}
		if i > 0 && c != cell {
			return "", fmt.Errorf("%w: %w: a multi is atomic within one cell; %s is in cell %q, %s in cell %q",
				namespace.ErrBadCommand, client.ErrCrossCell, paths[0], cell, p, c)
		}
		cell = c
	}
	return cell, nil
}

// forward sends r to cell's members until one acts on it, and copies its
// answer back. An event stream is resumed on another member when its
// member goes away.
func (g *gateway) forward(w http.ResponseWriter, r *http.Request, cell string, body []byte, token string) {
	ctx := r.Context()
	deadline := time.Now().Add(gatewayTimeout)
	readOnly := r.Method == http.MethodGet
	identity := g.callerIdentity(r)
	lastID := r.Header.Get("Last-Event-ID")
	streaming := false // an event stream's header went out
	for attempt := 0; ; attempt++ {
		addrs, err := g.memberAPIs(ctx, cell, attempt > 0)
		if err != nil && len(addrs) == 0 {
			g.log.Debug("gateway: no member list", "cell", cell, "err", err)
		}
		for _, addr := range addrs {
			res := g.try(ctx, w, r, addr, body, token, identity, lastID, streaming, cell)
			switch {
			case res.done:
				return
			case res.sent && !readOnly:
				apiwire.WriteError(w, fmt.Errorf("%w: cell %q: the member's answer was lost: %v", session.ErrUnknownOutcome, cell, res.err))
				return
			}
			if res.lastID != "" {
				lastID = res.lastID
			}
			streaming = streaming || res.streaming
		}
		if time.Now().After(deadline) && !streaming {
			apiwire.WriteError(w, fmt.Errorf("%w: no member of cell %q acted on the request within %v", session.ErrNoLeader, cell, gatewayTimeout))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tryResult is how one attempt ended.
type tryResult struct {
	done      bool   // an answer went to the caller: stop
	sent      bool   // it may have reached a member (the answer was lost)
	err       error  // why it did not finish
	streaming bool   // an event stream's header went out; resume it
	lastID    string // the last event id passed on
}

// try sends one attempt to addr.
func (g *gateway) try(ctx context.Context, w http.ResponseWriter, r *http.Request, addr string, body []byte, token, identity, lastID string, streaming bool, cell string) tryResult {
	q := r.URL.Query()
	q.Del("cell")
	u := "https://" + addr + r.URL.EscapedPath()
	if enc := q.Encode(); enc != "" {
		u += "?" + enc
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, u, bytes.NewReader(body))
	if err != nil {
		apiwire.WriteError(w, fmt.Errorf("%w: %v", session.ErrInternal, err))
		return tryResult{done: true}
	}
	for _, h := range []string{"Content-Type", "Accept"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	if token != "" {
		req.Header.Set(apiwire.HeaderSession, token)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	req.Header.Set(apiwire.HeaderIdentity, identity)
	resp, err := g.fwd.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" || ctx.Err() != nil {
			return tryResult{err: err, streaming: streaming}
		}
		return tryResult{sent: true, err: err, streaming: streaming}
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get(apiwire.HeaderRetry) != "" {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return tryResult{streaming: streaming}
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return g.stream(w, resp, streaming, lastID)
	}
	if streaming {
		// The stream could not be resumed (history gone, a refusal):
		// end it; the caller reconnects as after any end.
		return tryResult{done: true}
	}
	whole, err := io.ReadAll(io.LimitReader(resp.Body, 4*maxGatewayBody))
	if err != nil {
		return tryResult{sent: true, err: err}
	}
	if r.Method == http.MethodPost && r.URL.Path == "/api/v1/sessions" && resp.StatusCode/100 == 2 {
		whole = cellToken(whole, cell)
	}
	for k, vs := range resp.Header {
		if k != apiwire.HeaderRetry && k != "Content-Length" {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(whole)
	return tryResult{done: true}
}

// cellToken makes a session open's token name its cell: "<cell>/<token>".
func cellToken(b []byte, cell string) []byte {
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return b
	}
	if t, ok := m["token"].(string); ok {
		m["token"] = cell + "/" + t
	}
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return b
	}
	return append(out, '\n')
}

// stream passes an event stream on, one whole event at a time, so that a
// member dying mid-event leaves no half event with the caller; it ends
// with done when the member ended it or the caller left, and asks to be
// resumed (from the last id passed on) when the member went away.
func (g *gateway) stream(w http.ResponseWriter, resp *http.Response, started bool, lastID string) tryResult {
	rc := http.NewResponseController(w)
	if !started {
		for k, vs := range resp.Header {
			if k != "Content-Length" {
				w.Header()[k] = vs
			}
		}
		w.WriteHeader(resp.StatusCode)
		_ = rc.Flush()
	}
	rd := bufio.NewReader(resp.Body)
	var event bytes.Buffer
	id, ready := "", false
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				return tryResult{done: true} // the member ended the stream
			}
			return tryResult{streaming: true, lastID: lastID, err: err}
		}
		if v, ok := strings.CutPrefix(line, "id:"); ok {
			id = strings.TrimSpace(v)
		}
		ready = ready || strings.TrimSpace(line) == "event: ready"
		event.WriteString(line)
		if line != "\n" && line != "\r\n" {
			continue
		}
		if !(started && ready) { // a resumed stream's ready: the caller has seen one
			if _, err := w.Write(event.Bytes()); err != nil {
				return tryResult{done: true}
			}
			if rc.Flush() != nil {
				return tryResult{done: true}
			}
			if id != "" {
				lastID = id
			}
		}
		event.Reset()
		id, ready = "", false
	}
}
