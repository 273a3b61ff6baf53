package adminapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// DefaultScheme is the scheme of an admin address given as host:port: the
// admin endpoint speaks only HTTPS.
const DefaultScheme = "https"

// Client calls members' admin endpoints: the latch CLI (member, snapshot,
// status), chaos and bench. It follows a follower's 307 to the leader,
// re-sending the body. An answer other than 200 is a *ReplyError.
type Client struct {
	hc *http.Client
}

// NewClient returns a client using conf for https addresses (nil: system
// roots, no client certificate) whose requests each take at most timeout
// (0: no bound beyond the ctx).
func NewClient(conf *tls.Config, timeout time.Duration) *Client {
	return &Client{hc: &http.Client{
		Timeout:   timeout,
		Transport: &http.Transport{TLSClientConfig: conf, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute},
	}}
}

// CloseIdleConnections closes kept-alive connections.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// ReplyError is an admin answer other than 200 OK.
type ReplyError struct {
	Addr   string
	Status int
	Reply  Reply
}

func (e *ReplyError) Error() string {
	msg := e.Reply.Error
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Reply.Code != "" {
		return fmt.Sprintf("latch: admin %s: %s (%s)", e.Addr, msg, e.Reply.Code)
	}
	return fmt.Sprintf("latch: admin %s: %s", e.Addr, msg)
}

// BaseURL turns "host:port" or "scheme://host:port" into a base URL.
func BaseURL(addr string) (string, error) {
	if !strings.Contains(addr, "://") {
		addr = DefaultScheme + "://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		return "", fmt.Errorf("latch: admin address %q: %v", addr, err)
	}
	if u.Scheme != "https" {
		return "", fmt.Errorf("latch: admin address %q: scheme must be https (the admin endpoint speaks only HTTPS)", addr)
	}
	if u.Host == "" || u.Port() == "" {
		return "", fmt.Errorf("latch: admin address %q: needs host:port", addr)
	}
	return u.Scheme + "://" + u.Host, nil
}

// Status reads GET /v1/status of the member at addr.
func (c *Client) Status(ctx context.Context, addr string) (Status, error) {
	var st Status
	err := c.Do(ctx, http.MethodGet, addr, "/v1/status", nil, &st)
	return st, err
}

// Do sends in (JSON; nil for no body) to path on the member at addr and
// decodes a 200 answer into out (nil: discard).
func (c *Client) Do(ctx context.Context, method, addr, path string, in, out any) error {
	resp, err := c.Open(ctx, method, addr, path, in)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return err
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(out); err != nil {
		return fmt.Errorf("latch: admin %s%s: bad answer: %w", addr, path, err)
	}
	return nil
}

// Open sends the request and returns a 200 answer whose body the caller
// reads and closes (a download); any other answer is a *ReplyError.
func (c *Client) Open(ctx context.Context, method, addr, path string, in any) (*http.Response, error) {
	base, err := BaseURL(addr)
	if err != nil {
		return nil, err
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b) // GetBody is set: a 307 re-sends it
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		return nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.send(addr, req)
}

// Upload posts the file at file as the body of path and decodes a 200
// answer into out.
func (c *Client) Upload(ctx context.Context, addr, path, file string, out any) error {
	base, err := BaseURL(addr)
	if err != nil {
		return err
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, f)
	if err != nil {
		return err
	}
	req.ContentLength = fi.Size()
	req.GetBody = func() (io.ReadCloser, error) { return os.Open(file) } // a 307 re-sends it
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := c.send(addr, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(out); err != nil {
		return fmt.Errorf("latch: admin %s%s: bad answer: %w", addr, path, err)
	}
	return nil
}

func (c *Client) send(addr string, req *http.Request) (*http.Response, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("latch: admin %s: %w", addr, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	rerr := &ReplyError{Addr: addr, Status: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, &rerr.Reply) != nil || rerr.Reply.Error == "" {
		rerr.Reply.Error = strings.TrimSpace(string(b))
	}
	return nil, rerr
}
