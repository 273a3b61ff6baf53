package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// retryable reports whether a request of type t may be sent again after
// the connection broke with the request possibly applied: reads, and
// requests whose repetition changes nothing. Writes are not: a create sent
// twice would fail the second time although the first succeeded.
func retryable(t session.MsgType) bool {
	switch t {
	case session.MsgCreate, session.MsgSet, session.MsgDelete, session.MsgMulti, session.MsgTxn,
		session.MsgLock, session.MsgLockRelease, session.MsgLockRenew, session.MsgACLSet, session.MsgACLRemove:
		return false
	}
	return true
}

// do sends req on the current link and returns the successful response,
// or the request's error with its sentinel identity (errors.Is). It waits
// for a link while the client reconnects, follows ErrNotLeader redirects
// up to MaxRedirects in a row, retries while the cluster has no leader,
// and acts for s when s is not nil (req.Session is set to s's id and s is
// attached to the link first). The wait is bounded by ctx. When the
// server answered with an error, the answer is returned with it (a failed
// Multi carries its per-op results).
func (c *Client) do(ctx context.Context, s *Session, req *session.Request) (*session.Response, error) {
	resp, _, err := c.send(ctx, s, req)
	return resp, err
}

// send is do, also returning the link that answered.
func (c *Client) send(ctx context.Context, s *Session, req *session.Request) (*session.Response, *link, error) {
	resp, l, _, err := c.sendAt(ctx, s, req)
	return resp, l, err
}

// sendAt is send, also returning when the attempt that was answered left:
// the server acted on req at or after then, however long the request
// waited for a link or was retried before.
func (c *Client) sendAt(ctx context.Context, s *Session, req *session.Request) (*session.Response, *link, time.Time, error) {
	hops, idle := redirects{}, 0
	for {
		l, err := c.ready4(ctx, s, req)
		if err != nil {
			return nil, nil, time.Time{}, err
		}
		if l.conn.Context().Err() != nil {
			// Known dead before sending: nothing can have been applied.
			c.drop(l, "", context.Cause(l.conn.Context()))
			continue
		}
		sent := time.Now()
		resp, err := session.RoundTrip(ctx, l.conn, req)
		if err != nil {
			if ctx.Err() != nil {
				if !retryable(req.Type) {
					// The request may have reached the leader before the
					// stream was reset: it may yet be applied.
					return nil, nil, time.Time{}, fmt.Errorf("%w: %s %s: %w", ErrUnknownOutcome, req.Type, req.Path, ctx.Err())
				}
				return nil, nil, time.Time{}, ctx.Err()
			}
			if errors.Is(err, ErrFrameTooLarge) {
				return nil, nil, time.Time{}, err // refused before sending
			}
			if !isStreamErr(err) {
				c.drop(l, "", err) // else only the stream failed
			}
			if !retryable(req.Type) {
				return nil, nil, time.Time{}, fmt.Errorf("%w: connection lost during %s %s: %v", ErrUnknownOutcome, req.Type, req.Path, err)
			}
			if isStreamErr(err) {
				idle++
				if !c.sleep(ctx, idle) {
					return nil, nil, time.Time{}, c.gaveUp(ctx, err)
				}
			}
			continue
		}
		c.saw(resp.Rev)
		err = resp.Err()
		if err == nil {
			return resp, l, sent, nil
		}
		if retry, err := c.onError(ctx, l, s, req, err, hops, &idle); !retry {
			return resp, l, sent, err
		}
	}
}

// ready4 returns the link to send req on, with s attached to it.
func (c *Client) ready4(ctx context.Context, s *Session, req *session.Request) (*link, error) {
	for {
		if s != nil {
			if err := s.usable(); err != nil {
				return nil, err
			}
			req.Session = s.id
		}
		l, err := c.waitLink(ctx, s)
		if err != nil {
			return nil, err
		}
		if s == nil {
			return l, nil
		}
		err = c.resume(ctx, l, s)
		if err == nil {
			if err := s.usable(); err != nil {
				return nil, err
			}
			return l, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if isWire(err) && !retryElsewhere(err) {
			return nil, err
		}
		c.drop(l, leaderOf(err), err)
	}
}

// retryElsewhere reports whether a member's error says another member (or
// this one, later) can serve the request: it is not the leader, there is
// none yet, or it is shutting down.
func retryElsewhere(err error) bool {
	return errors.Is(err, ErrNotLeader) || errors.Is(err, ErrNoLeader) || errors.Is(err, namespace.ErrClosed)
}

// redirects counts, per leader named, the "not the leader" answers one
// call followed: MaxRedirects bounds a redirect loop, not the leader
// changes a long call lives through.
type redirects map[string]int

// noLeaderDrop is how many "no leader" answers in a row a call takes on
// one link before it drops the link and lets connect ask every member: a
// member cut off from the others never learns the new leader.
const noLeaderDrop = 3

// onError decides what a failed answer means: retry (after dropping the
// link or pausing) or give up with the error to return. A "not the
// leader" naming a leader sends the call there; the link's member then
// no longer leads, and connect probes the named leader before dialing it,
// so one that is dead or stopped counts as "no leader yet". Without a
// leader named the call pauses (an election runs) and, after a few such
// answers, looks elsewhere; either way it ends only with ctx.
func (c *Client) onError(ctx context.Context, l *link, s *Session, req *session.Request, err error, hops redirects, idle *int) (bool, error) {
	switch {
	case errors.Is(err, ErrNotLeader) && leaderOf(err) != "":
		leader := leaderOf(err)
		if hops[leader] >= c.cfg.MaxRedirects {
			return false, err
		}
		hops[leader]++
		c.drop(l, leader, err)
		return true, nil
	case errors.Is(err, ErrNotLeader) || errors.Is(err, ErrNoLeader):
		// An election is running: the member will know the leader soon.
		*idle++
		if *idle%noLeaderDrop == 0 {
			c.drop(l, "", err)
		}
		return c.sleep(ctx, min(*idle, 2)), c.gaveUp(ctx, err)
	case errors.Is(err, ErrBehind):
		// A Stale read on a member that has not applied what this client
		// saw yet (a leader just elected): it will soon.
		*idle++
		return c.sleep(ctx, min(*idle, 2)), c.gaveUp(ctx, err)
	case errors.Is(err, namespace.ErrClosed):
		// The member is shutting down: go elsewhere.
		c.drop(l, "", err)
		if !retryable(req.Type) {
			return false, fmt.Errorf("%w: %s %s: %w", ErrUnknownOutcome, req.Type, req.Path, err)
		}
		return true, nil
	case s != nil && errors.Is(err, ErrUnknownSession):
		// The member does not have s attached to this connection (it
		// restarted, or we raced a reconnect): attach again and retry.
		s.detach(l.gen)
		*idle++
		return c.sleep(ctx, *idle), c.gaveUp(ctx, err)
	case s != nil && sessionGone(err):
		s.expire(err)
		return false, s.Err()
	}
	return false, err
}

// gaveUp is the error of a request that stopped retrying err because ctx
// or the client ended.
func (c *Client) gaveUp(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", err, ctx.Err())
	}
	return fmt.Errorf("%w (%w)", err, ErrClosed)
}

// sleep pauses before retry n, reporting false (with nothing to retry)
// when ctx or the client ends first.
func (c *Client) sleep(ctx context.Context, n int) bool {
	t := time.NewTimer(c.backoff(n))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-c.ctx.Done():
	}
	return false
}

// stream opens a streaming request (Watch, Lock) on the current link with
// the redirect and reconnect handling of do, and returns the reader with
// its first frame, which the server sends to acknowledge the request.
func (c *Client) stream(ctx context.Context, s *Session, req *session.Request, open func(context.Context, *session.Conn, *session.Request) (*session.StreamReader, error)) (*session.StreamReader, *session.Response, *link, error) {
	hops, idle := redirects{}, 0
	for {
		l, err := c.ready4(ctx, s, req)
		if err != nil {
			return nil, nil, nil, err
		}
		sr, err := open(ctx, l.conn, req)
		var first *session.Response
		if err == nil {
			first, err = sr.Next()
		}
		if err == nil {
			return sr, first, l, nil
		}
		if sr != nil {
			sr.Close()
		}
		if ctx.Err() != nil {
			return nil, nil, nil, ctx.Err()
		}
		if !isWire(err) {
			// Not an answer: the stream or the connection broke. A
			// stream that never got its first frame did nothing the
			// server keeps (a watch is gone with its stream; a lock
			// request is withdrawn).
			if !isStreamErr(err) {
				c.drop(l, "", err)
				continue
			}
			idle++
			if !c.sleep(ctx, idle) {
				return nil, nil, nil, c.gaveUp(ctx, err)
			}
			continue
		}
		if retry, err := c.onError(ctx, l, s, req, err, hops, &idle); !retry {
			return nil, nil, nil, err
		}
	}
}
