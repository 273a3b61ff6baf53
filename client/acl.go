package client

import (
	"context"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// ACL rules (namespace/doc.go, "ACLs and ownership"): rights on a path
// prefix for an identity, the most specific rule of the identity winning.
type (
	ACLRule = namespace.ACLRule
	Perm    = namespace.Perm
)

// Rights of an ACLRule.
const (
	PermRead   = namespace.PermRead
	PermWrite  = namespace.PermWrite
	PermCreate = namespace.PermCreate
	PermDelete = namespace.PermDelete
	PermAdmin  = namespace.PermAdmin
	PermNone   = namespace.PermNone
	PermAll    = namespace.PermAll
)

// ACL is the cluster's replicated rule set.
type ACL struct {
	// Enforced is false until the first leader bootstrapped the rules
	// (a cluster upgraded from version 1, for a moment).
	Enforced bool
	// Default is what an identity no rule names may do.
	Default Perm
	Rules   []ACLRule // sorted by identity, then prefix
}

// ParseRules reads rules written one a line as IDENTITY PREFIX RIGHTS
// (see namespace.ParseRules).
func ParseRules(text string) ([]ACLRule, error) { return namespace.ParseRules(text) }

// ACL returns the replicated rules (linearizable).
func (c *Client) ACL(ctx context.Context) (ACL, error) {
	resp, err := c.do(ctx, nil, &session.Request{Type: session.MsgACL})
	if err != nil {
		return ACL{}, err
	}
	if resp.ACL == nil {
		return ACL{}, nil
	}
	return ACL{Enforced: resp.ACL.Enforced, Default: resp.ACL.Default, Rules: resp.ACL.Rules}, nil
}

// SetACL sets rules (replacing the rights of an identity on the same
// prefix), all or none, in one command ordered with every other. The
// client's identity needs admin on each prefix. Errors:
// ErrPermissionDenied, ErrBadRule, ErrUnknownOutcome.
func (c *Client) SetACL(ctx context.Context, rules ...ACLRule) error {
	_, err := c.do(ctx, nil, &session.Request{Type: session.MsgACLSet, ACL: rules})
	return err
}

// RemoveACL removes the rules of rules' identities on their prefixes
// (rights ignored), like SetACL.
func (c *Client) RemoveACL(ctx context.Context, rules ...ACLRule) error {
	_, err := c.do(ctx, nil, &session.Request{Type: session.MsgACLRemove, ACL: rules})
	return err
}
