package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// apiClient talks to members' HTTP/JSON APIs in tests.
type apiClient struct {
	t  testing.TB
	hc *http.Client
}

func newAPIClient(t testing.TB, caFile string) *apiClient {
	t.Helper()
	return newAPIClientCert(t, caFile, "", "")
}

// newAPIClientCert is newAPIClient presenting a client certificate.
func newAPIClientCert(t testing.TB, caFile, certFile, keyFile string) *apiClient {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("no CA in", caFile)
	}
	conf := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	tr := &http.Transport{TLSClientConfig: conf, ForceAttemptHTTP2: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &apiClient{t: t, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// apiReply is a decoded JSON answer.
type apiReply map[string]any

func (r apiReply) num(key string) uint64 {
	f, _ := r[key].(float64)
	return uint64(f)
}

func (r apiReply) str(key string) string {
	s, _ := r[key].(string)
	return s
}

func (r apiReply) list(key string) []any {
	l, _ := r[key].([]any)
	return l
}

// raw sends one request and returns the status and decoded body; body
// may be a string (sent as is) or a value (sent as JSON). hdr are
// "Name: value" pairs.
func (c *apiClient) raw(addr, method, path string, body any, hdr ...string) (int, apiReply, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		js, err := json.Marshal(b)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, "https://"+addr+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json") // hdr may say otherwise
	}
	for _, h := range hdr {
		k, v, _ := strings.Cut(h, ":")
		if k == "Host" {
			req.Host = strings.TrimSpace(v)
			continue
		}
		req.Header.Set(k, strings.TrimSpace(v))
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	var out apiReply
	if err := json.Unmarshal(b, &out); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: %d: not a JSON object: %q", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode, out, nil
}

// do is raw that fails the test on a transport error or an unexpected
// status.
func (c *apiClient) do(want int, addr, method, path string, body any, hdr ...string) apiReply {
	c.t.Helper()
	code, out, err := c.raw(addr, method, path, body, hdr...)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	if code != want {
		c.t.Fatalf("%s %s: status %d, want %d: %v", method, path, code, want, out)
	}
	return out
}

// sseEvent is one Server-Sent Event.
type sseEvent struct {
	ID, Name string
	Data     apiReply
}

// sseStream reads one event stream until its context ends.
type sseStream struct {
	events chan sseEvent
	done   chan struct{}
	cancel context.CancelFunc
}

func (c *apiClient) sse(addr, path, lastID string) (*sseStream, error) {
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	hc := &http.Client{Transport: c.hc.Transport} // no overall timeout
	resp, err := hc.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("GET %s: %d: %s", path, resp.StatusCode, b)
	}
	s := &sseStream{events: make(chan sseEvent, 1<<16), done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(s.done)
		defer close(s.events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		var data []byte
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Name != "" {
					_ = json.Unmarshal(data, &ev.Data)
					select {
					case s.events <- ev:
					case <-ctx.Done():
						return
					}
				}
				ev, data = sseEvent{}, nil
			case strings.HasPrefix(line, "id: "):
				ev.ID = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.Name = line[7:]
			case strings.HasPrefix(line, "data: "):
				data = append(data, line[6:]...)
			}
		}
	}()
	return s, nil
}

func (s *sseStream) close() {
	s.cancel()
	<-s.done
}

// next returns the next event named one of names (others are skipped),
// failing the test after timeout.
func (s *sseStream) next(t testing.TB, timeout time.Duration, names ...string) sseEvent {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatalf("event stream ended while waiting for %v", names)
			}
			for _, n := range names {
				if ev.Name == n {
					return ev
				}
			}
		case <-deadline:
			t.Fatalf("no %v event within %v", names, timeout)
		}
	}
}
