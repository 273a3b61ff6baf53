package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/lease"
	"github.com/latch-io/latch/server/quicfront"
	"github.com/latch-io/latch/session"
)

// secretLen is the size of a session secret: 128 random bits.
const secretLen = 16

// grantTTL clamps a client's TTL wish into the cluster settings
// [MinSessionTTLMillis, MaxSessionTTLMillis] (ZooKeeper's negotiation):
// the client learns the granted TTL from the answer. 0 asks for the
// server's choice, the middle of the range kept at or below 10s. The
// leader decides it (the command carries the granted TTL), from the
// settings of the last committed batch.
func (f *front) grantTTL(millis int64) (time.Duration, error) {
	return grantTTL(f.s.store.Limits(), millis)
}

func grantTTL(l namespace.Limits, millis int64) (time.Duration, error) {
	lo := time.Duration(l.MinSessionTTLMillis) * time.Millisecond
	hi := time.Duration(l.MaxSessionTTLMillis) * time.Millisecond
	switch {
	case millis < 0:
		return 0, fmt.Errorf("%w: session TTL %dms is negative", namespace.ErrBadCommand, millis)
	case millis == 0:
		return min(max(10*time.Second, lo), hi), nil
	}
	if millis > int64(hi/time.Millisecond) {
		return hi, nil
	}
	return max(time.Duration(millis)*time.Millisecond, lo), nil
}

func (f *front) openSession(ctx context.Context, c *quicfront.Conn, req *session.Request) (*session.Response, error) {
	if err := f.keep.Serving(); err != nil {
		return nil, err
	}
	ttl, err := f.grantTTL(req.TTLMillis)
	if err != nil {
		return nil, err
	}
	secret := make([]byte, secretLen)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("%w: session secret: %v", session.ErrInternal, err)
	}
	release, err := f.keep.Reserve(c.Identity(), c.Host(), secret)
	if err != nil {
		return nil, err
	}
	defer release()
	res, err := f.propose(ctx, &namespace.Command{
		Op: namespace.OpSessionOpen, Secret: secret, TTLMillis: ttl.Milliseconds(), Identity: c.Identity(),
		Host: anonymousHost(c),
	})
	if err != nil {
		return nil, err
	}
	f.keep.Opened(res.Session, ttl, lease.QuotaKey(c.Identity(), c.Host()), secret)
	c.Attach(res.Session)
	return &session.Response{Session: res.Session, Secret: secret, TTLMillis: ttl.Milliseconds(), Rev: res.Index}, nil
}

// resumeSession attaches an existing session to this connection: the
// client reconnected, or followed a new leader. It also renews the lease,
// since the client just proved it is alive.
func (f *front) resumeSession(_ context.Context, c *quicfront.Conn, req *session.Request) (*session.Response, error) {
	if err := f.keep.Serving(); err != nil {
		return nil, err
	}
	if err := c.AllowResume(); err != nil {
		return nil, err
	}
	si, err := f.s.store.Session(req.Session)
	if errors.Is(err, namespace.ErrNoSession) {
		return nil, fmt.Errorf("%w: session %d", session.ErrSessionExpired, req.Session)
	}
	if err != nil {
		return nil, err
	}
	// The identity check keeps a secret stolen from one mTLS client from
	// working for another; it is not a substitute for the secret.
	if subtle.ConstantTimeCompare(si.Secret, req.Secret) != 1 || (si.Identity != "" && si.Identity != c.Identity()) {
		return nil, c.ResumeFailed(req.Session) // quicfront/resumelimit.go
	}
	ttl, ok := f.keep.Renew(req.Session)
	if !ok {
		return nil, fmt.Errorf("%w: session %d", session.ErrSessionExpired, req.Session)
	}
	c.Attach(req.Session)
	return &session.Response{Session: req.Session, TTLMillis: ttl.Milliseconds()}, nil
}

// keepAlive renews leases in the leader's memory; it never proposes.
func (f *front) keepAlive(_ context.Context, c *quicfront.Conn, req *session.Request) (*session.Response, error) {
	if err := f.keep.Serving(); err != nil {
		return nil, err
	}
	renew := func(id uint64) (time.Duration, error) {
		if err := c.CheckSession(id); err != nil {
			return 0, err
		}
		if id == 0 {
			return 0, fmt.Errorf("%w: keepalive names no session", session.ErrUnknownSession)
		}
		ttl, ok := f.keep.Renew(id)
		if !ok {
			return 0, fmt.Errorf("%w: session %d", session.ErrSessionExpired, id)
		}
		return ttl, nil
	}
	if len(req.Sessions) == 0 {
		ttl, err := renew(req.Session)
		if err != nil {
			return nil, err
		}
		return &session.Response{TTLMillis: ttl.Milliseconds()}, nil
	}
	if len(req.Sessions) >= session.MaxKeepAliveBatch {
		return nil, fmt.Errorf("%w: %d sessions in one keepalive, max %d", session.ErrMalformed, len(req.Sessions)+1, session.MaxKeepAliveBatch)
	}
	resp := &session.Response{KeepAlives: make([]session.KeepAliveResult, 0, len(req.Sessions)+1)}
	for _, id := range append([]uint64{req.Session}, req.Sessions...) {
		r := session.KeepAliveResult{Session: id}
		if ttl, err := renew(id); err != nil {
			r.Code, r.Message = session.CodeOf(err), err.Error()
		} else {
			r.TTLMillis = ttl.Milliseconds()
		}
		resp.KeepAlives = append(resp.KeepAlives, r)
	}
	return resp, nil
}

func (f *front) closeSession(ctx context.Context, c *quicfront.Conn, req *session.Request) (*session.Response, error) {
	if req.Session == 0 {
		return nil, fmt.Errorf("%w: close names no session", session.ErrUnknownSession)
	}
	if err := f.keep.Serving(); err != nil {
		return nil, err
	}
	res, err := f.propose(ctx, &namespace.Command{Op: namespace.OpSessionClose, Session: req.Session})
	if errors.Is(err, namespace.ErrNoSession) {
		c.Detach(req.Session)
		return nil, fmt.Errorf("%w: session %d", session.ErrSessionExpired, req.Session)
	}
	if err != nil {
		return nil, err
	}
	c.Detach(req.Session)
	return &session.Response{Rev: res.Index}, nil
}
