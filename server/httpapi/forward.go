package httpapi

// Leader-only requests on a follower: forwarded to the leader's API on the
// caller's behalf, looked for again while none is known or the one reached
// says Latch-Retry (doc.go has the whole design).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/latch-io/latch/session"
)

// notLeader is the error of a member that cannot serve a leader-only
// request now.
func (a *API) notLeader() error {
	if id, _ := a.m.Leader(); id == "" || id == a.cfg.ID {
		return fmt.Errorf("%w: no ready leader is known yet", session.ErrNoLeader)
	}
	return session.NotLeader("")
}

// forwardPoll is how often a forwarding member looks for the leader while
// none is known or reachable.
const forwardPoll = 20 * time.Millisecond

// atLeader serves r where the ready leader is: here, or forwarded to the
// leader's API on c's behalf with the answer copied back. While no
// leader is known or reachable, or the attempt was not acted on (this
// member lost leadership first, or the member reached says Latch-Retry),
// it tries again until ApplyTimeout. A forwarded request that reached a
// leader and failed on the way back is not resent unless it only reads
// (503 UnknownOutcome). A request forwarded to this member is never
// forwarded again: its first member looks again.
func (a *API) atLeader(w http.ResponseWriter, r *http.Request, c caller, h apiHandler) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(a.cfg.MaxBody)))
	if err != nil {
		apiError(w, bodyError(err))
		return
	}
	ctx := r.Context()
	deadline := time.NewTimer(a.cfg.ApplyTimeout)
	defer deadline.Stop()
	readOnly := r.Method == http.MethodGet
	for {
		lid, _ := a.m.Leader()
		switch {
		case a.m.IsLeader():
			r.Body = io.NopCloser(bytes.NewReader(body))
			rw := &retryWriter{ResponseWriter: w, pass: c.forwarded}
			h(rw, r, c)
			if !rw.retry {
				return
			}
		case c.forwarded:
			w.Header().Set(hdrRetry, "leader")
			apiError(w, a.notLeader())
			return
		case lid != "" && lid != a.cfg.ID:
			if addr := a.m.MemberAPIAddr(lid); addr != "" {
				done, err := a.forwardTo(ctx, w, r, c, addr, body)
				if done {
					return
				}
				if err != nil && !readOnly {
					apiError(w, fmt.Errorf("%w: forwarding to the leader: %v", session.ErrUnknownOutcome, err))
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			return // the caller left
		case <-deadline.C:
			apiError(w, fmt.Errorf("%w: no leader reachable within %v", session.ErrNoLeader, a.cfg.ApplyTimeout))
			return
		case <-time.After(forwardPoll):
		}
	}
}

// retryWriter swallows an answer that says it was not acted on (503
// with Latch-Retry), so atLeader can try again, unless pass (the request
// was forwarded: the member that forwarded it retries).
type retryWriter struct {
	http.ResponseWriter
	pass  bool
	retry bool
}

func (rw *retryWriter) WriteHeader(code int) {
	if code == http.StatusServiceUnavailable && rw.Header().Get(hdrRetry) != "" && !rw.pass {
		rw.retry = true
		rw.Header().Del(hdrRetry)
		rw.Header().Del("Content-Type")
		return
	}
	rw.ResponseWriter.WriteHeader(code)
}

func (rw *retryWriter) Write(b []byte) (int, error) {
	if rw.retry {
		return len(b), nil
	}
	return rw.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController flush event streams.
func (rw *retryWriter) Unwrap() http.ResponseWriter { return rw.ResponseWriter }

// forwardTo sends one attempt to addr. done: the answer was written.
// A nil error with !done means the request was not acted on (it never
// left, or the member said Latch-Retry): try again.
func (a *API) forwardTo(ctx context.Context, w http.ResponseWriter, r *http.Request, c caller, addr string, body []byte) (done bool, err error) {
	req, err := http.NewRequestWithContext(ctx, r.Method, "https://"+addr+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		apiError(w, fmt.Errorf("%w: %v", session.ErrInternal, err))
		return true, nil
	}
	for _, h := range []string{"Content-Type", "Accept", hdrSession, "Last-Event-ID"} {
		if v := r.Header.Get(h); v != "" {
			req.Header.Set(h, v)
		}
	}
	req.Header.Set(hdrForwarded, a.cfg.ID)
	req.Header.Set(hdrIdentity, c.identity)
	resp, err := a.fwd.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return false, nil // never sent
		}
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get(hdrRetry) != "" {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return false, nil
	}
	var whole []byte
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// Read an answer whole before passing it on: a leader that dies
		// half way through must not leave the caller a truncated body
		// under a success status.
		if whole, err = io.ReadAll(io.LimitReader(resp.Body, 4*int64(a.cfg.MaxBody))); err != nil {
			return false, err
		}
	}
	for k, vs := range resp.Header {
		if k == hdrRetry {
			continue
		}
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	if whole != nil {
		w.Write(whole)
		return true, nil
	}
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return true, nil
			}
			_ = rc.Flush()
		}
		if rerr != nil {
			return true, nil
		}
	}
}
