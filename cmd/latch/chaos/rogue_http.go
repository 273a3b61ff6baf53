package chaos

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// HTTPLockPath is the lock the rogue worker's victim holds over the HTTP
// API on an implicit lease (client_id + ttl_ms).
const HTTPLockPath = RootPath + "/http-lock"

// victimTTL is the victim's ttl_ms; it renews at a third of it.
const victimTTL = 10 * time.Second

// rogueHTTP is the rogue worker's HTTP side: a client of the members'
// APIs (any member serves any request), and the victim, an HTTP client
// in the same process that holds an implicit lease on HTTPLockPath. The
// victim's lease token stays in the victim: the attacks know only what
// GET /api/v1/locks/... shows, as another client on the network would.
type rogueHTTP struct {
	addrs []string
	hc    *http.Client
	id    string
	next  int

	victim struct {
		lease   string // lease_token of the acquire answer
		token   uint64 // fencing token
		renewed time.Time
	}
}

func newRogueHTTP(addrs []string, base *tls.Config, id string) *rogueHTTP {
	conf := &tls.Config{MinVersion: tls.VersionTLS13}
	if base != nil {
		conf = base.Clone()
	}
	conf.NextProtos = []string{"h2", "http/1.1"}
	tr := &http.Transport{TLSClientConfig: conf, ForceAttemptHTTP2: true}
	return &rogueHTTP{addrs: addrs, id: id, hc: &http.Client{Transport: tr, Timeout: opTimeout}}
}

func (h *rogueHTTP) close() { h.hc.CloseIdleConnections() }

// do sends one JSON request to the next member and decodes the answer.
func (h *rogueHTTP) do(ctx context.Context, method, path string, body any) (int, map[string]any, error) {
	addr := h.addrs[h.next%len(h.addrs)]
	h.next++
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "https://"+addr+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&out); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: %d: %v", method, path, resp.StatusCode, err)
	}
	return resp.StatusCode, out, nil
}

func lockURL(path, action string) string { return "/api/v1/locks" + path + "/" + action }

// keepVictim has the victim hold its lock: renew it when a third of its
// TTL passed, take it again when it was lost (a leader change, a pause).
// Errors only mean it tries again next time.
func (h *rogueHTTP) keepVictim(ctx context.Context) {
	v := &h.victim
	if v.lease != "" && time.Since(v.renewed) < victimTTL/3 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if v.lease != "" {
		code, _, err := h.do(ctx, "POST", lockURL(HTTPLockPath, "renew"),
			map[string]any{"fencing_token": v.token, "lease_token": v.lease})
		if err == nil && code == http.StatusOK {
			v.renewed = time.Now()
			return
		}
		if err != nil || code >= 500 {
			return // unknown: try again later
		}
		v.lease = "" // lost it
	}
	code, out, err := h.do(ctx, "POST", lockURL(HTTPLockPath, "acquire"),
		map[string]any{"client_id": "victim-" + h.id, "ttl_ms": victimTTL.Milliseconds()})
	if err == nil && code == http.StatusOK && out["acquired"] == true {
		tok, _ := out["fencing_token"].(float64)
		v.lease, _ = out["lease_token"].(string)
		v.token, v.renewed = uint64(tok), time.Now()
	}
}

// rogueHTTPTakeover reads the victim's queue and tries to renew and to
// release its lock with what the queue shows, and with a lease token
// guessed for the session the queue names.
func (w *worker) rogueHTTPTakeover(ctx context.Context) error {
	h := w.http
	h.keepVictim(ctx)
	qctx, cancel := context.WithTimeout(ctx, opTimeout)
	code, out, err := h.do(qctx, "GET", "/api/v1/locks"+HTTPLockPath, nil)
	cancel()
	if err != nil || code != http.StatusOK {
		return nil // no target this time
	}
	q, _ := out["queue"].([]any)
	for _, e := range q {
		li, _ := e.(map[string]any)
		if li["granted"] != true || li["lock_delay"] == true {
			continue
		}
		guess := make([]byte, 16)
		rand.Read(guess)
		sid, _ := li["session_id"].(float64)
		body := map[string]any{"client_id": li["client_id"], "fencing_token": li["fencing_token"]}
		if w.rng.IntN(2) == 0 {
			body["lease_token"] = fmt.Sprintf("%d.%s", uint64(sid), hex.EncodeToString(guess))
		}
		op, action := OpRogueHTTPRenew, "renew"
		if w.rng.IntN(2) == 0 {
			op, action = OpRogueHTTPRelease, "release"
		}
		node, _ := li["node"].(string)
		return w.rogueAttempt(ctx, op, node, func(octx context.Context) error {
			code, out, err := h.do(octx, "POST", lockURL(HTTPLockPath, action), body)
			switch {
			case err != nil:
				return fmt.Errorf("%w: %v", errHTTPUnknown, err)
			case code == http.StatusOK:
				return nil // taken over: a violation
			case code >= 500:
				return fmt.Errorf("%w: %d %v", errHTTPUnknown, code, out)
			}
			return fmt.Errorf("refused: %d %v", code, out)
		})
	}
	return nil
}

// errHTTPUnknown marks an HTTP attack whose outcome is unknown (no
// answer, or the member could not tell).
var errHTTPUnknown = errors.New("chaos: http outcome unknown")
