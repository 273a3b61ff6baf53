package server

import (
	"context"
	"fmt"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/quicfront"
	"github.com/latch-io/latch/session"
)

// ACL defaults (Config.ACLDefault).
const (
	ACLAllow = "allow" // identities no rule names may read, write, create and delete
	ACLDeny  = "deny"  // identities no rule names may do nothing
)

// aclDefault resolves Config.ACLDefault: "" is allow in Dev and without
// client certificates (TLSClientCA unset: every client is the identity "",
// so rules could tell nobody apart), deny with mutual TLS.
func (c *Config) aclDefault() namespace.Perm {
	switch c.ACLDefault {
	case ACLAllow:
		return namespace.PermRWCD
	case ACLDeny:
		return namespace.PermNone
	}
	if c.Dev || c.TLSClientCA == "" {
		return namespace.PermRWCD
	}
	return namespace.PermNone
}

// validateACL checks Admins and ACLDefault.
func (c *Config) validateACL() error {
	switch c.ACLDefault {
	case "", ACLAllow, ACLDeny:
	default:
		return fmt.Errorf("%w: ACLDefault: %q is not %q or %q", ErrBadConfig, c.ACLDefault, ACLAllow, ACLDeny)
	}
	for _, id := range c.Admins {
		r := namespace.ACLRule{Identity: id, Prefix: "/", Perms: namespace.PermAll}
		if err := namespace.ValidateRule(r, namespace.DefaultLimits()); err != nil {
			return fmt.Errorf("%w: Admins: %v", ErrBadConfig, err)
		}
	}
	return nil
}

// bootstrapACL makes the leader write the first rules through the log
// when the namespace has none: ACLDefault and the Admins as admins of /.
// The leader does it before it is ready, so no client command ever runs
// before the rules. Apply never reads the flags; it applies this command
// once and ignores later ones, so a race between leaders is harmless.
func (s *Server) bootstrapACL(ctx context.Context) error {
	if s.store.ACL().Enforced {
		return nil
	}
	cmd := &namespace.Command{Op: namespace.OpACLBootstrap, ACLDefault: s.cfg.aclDefault()}
	for _, id := range s.cfg.Admins {
		cmd.ACL = append(cmd.ACL, namespace.ACLRule{Identity: id, Prefix: "/", Perms: namespace.PermAll})
	}
	res, err := s.Propose(ctx, cmd)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return fmt.Errorf("ACL bootstrap: %w", err)
	}
	s.log.Info("ACLs bootstrapped", "default", cmd.ACLDefault, "admins", s.cfg.Admins)
	return nil
}

// registerACL installs the ACL handlers.
func (f *front) registerACL() {
	f.handleUnary(session.MsgACL, f.acl)
	f.handleUnary(session.MsgACLSet, f.aclChange(namespace.OpACLSet))
	f.handleUnary(session.MsgACLRemove, f.aclChange(namespace.OpACLRemove))
}

func (f *front) acl(ctx context.Context, _ *quicfront.Conn, req *session.Request) (*session.Response, error) {
	rev, err := f.readAt(ctx, req)
	if err != nil {
		return nil, err
	}
	a := f.s.store.ACL()
	return &session.Response{Rev: rev, ACL: &session.ACLInfo{Enforced: a.Enforced, Default: a.Default, Rules: a.Rules}}, nil
}

func (f *front) aclChange(op namespace.Op) quicfront.Unary {
	return func(ctx context.Context, c *quicfront.Conn, req *session.Request) (*session.Response, error) {
		res, err := f.propose(ctx, &namespace.Command{Op: op, ACL: req.ACL, Identity: c.Identity()})
		if err != nil {
			return nil, err
		}
		return &session.Response{Rev: res.Index}, nil
	}
}
