package client

import (
	"context"
	"fmt"

	"github.com/latch-io/latch/session"
)

// SessionInfo describes one session of the cluster (never its secret).
type SessionInfo = session.SessionInfo

// MemberInfo describes one cluster member.
type MemberInfo = session.MemberInfo

// StatusInfo describes one member: its raft state and indexes.
type StatusInfo = session.StatusInfo

// Sessions lists the cluster's sessions.
func (c *Client) Sessions(ctx context.Context, opts ...ReadOption) ([]SessionInfo, error) {
	o := buildRead(opts)
	resp, err := c.do(ctx, nil, &session.Request{Type: session.MsgSessions, Stale: o.stale})
	if err != nil {
		return nil, err
	}
	return resp.Sessions, nil
}

// Members lists the cluster's members; the leader has Leader set.
func (c *Client) Members(ctx context.Context, opts ...ReadOption) ([]MemberInfo, error) {
	o := buildRead(opts)
	resp, err := c.do(ctx, nil, &session.Request{Type: session.MsgMembers, Stale: o.stale})
	if err != nil {
		return nil, err
	}
	return resp.Members, nil
}

// Status describes the member the client is connected to (the leader) and
// returns the leader's client address as that member knows it.
func (c *Client) Status(ctx context.Context) (*StatusInfo, string, error) {
	resp, err := c.do(ctx, nil, &session.Request{Type: session.MsgStatus})
	if err != nil {
		return nil, "", err
	}
	if resp.Status == nil {
		return nil, "", fmt.Errorf("%w: status answer without a status", ErrMalformed)
	}
	return resp.Status, resp.Leader, nil
}

// StatusOf asks the member at the client address addr, whichever role it
// has, to describe itself, over a connection of its own that is closed
// before returning (the client's link stays with the leader). It serves
// per-member health checks.
func (c *Client) StatusOf(ctx context.Context, addr string) (*StatusInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	defer cancel()
	conn, err := session.Dial(ctx, addr, c.tls, c.tcfg)
	if err != nil {
		return nil, err
	}
	defer conn.CloseWithError(session.ConnClosed, "")
	if _, err := session.Hello(ctx, conn, c.cfg.ClientName); err != nil {
		return nil, err
	}
	resp, err := session.RoundTrip(ctx, conn, &session.Request{Type: session.MsgStatus, Stale: true})
	if err != nil {
		return nil, err
	}
	if err := resp.Err(); err != nil {
		return nil, err
	}
	if resp.Status == nil {
		return nil, fmt.Errorf("%w: status answer without a status", ErrMalformed)
	}
	return resp.Status, nil
}
