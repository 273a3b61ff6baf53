package server

import (
	"context"
	"fmt"

	"github.com/latch-io/latch/namespace"
)

// Cluster settings (namespace/settings.go) are replicated: what a member's
// Config.Limits (latchd's --lock-delay, --max-lock-delay, ...) says matters
// only while the cluster has none. The first leader of such a cluster
// records its Config.Limits through the log before it serves (a
// conditional OpSetLimits, so of two racing first leaders only one wins);
// from then on the replicated settings are in force on every member, a
// member whose configuration differs logs that its own values are ignored,
// and an operator changes them with PUT /v1/limits (latch limits set).

// bootstrapLimits records Config.Limits as the cluster settings when no
// command has set them yet. Only the leader calls it, before it is ready.
func (s *Server) bootstrapLimits(ctx context.Context) error {
	if s.store.LimitsRevision() != 0 {
		return nil
	}
	l := s.cfg.Limits
	res, err := s.Propose(ctx, &namespace.Command{Op: namespace.OpSetLimits, Version: 0, Limits: &l})
	if err != nil {
		return err
	}
	if res.Err != nil {
		return res.Err
	}
	s.log.Info("cluster settings bootstrapped from this member's configuration", "revision", res.Index, "limits", fmt.Sprintf("%+v", l))
	return nil
}

// SetLimits replaces the cluster settings through the log. version is the
// revision of the settings the change was based on (LimitsRevision), or
// namespace.AnyVersion; a stale one fails with namespace.ErrBadVersion.
func (s *Server) SetLimits(ctx context.Context, l namespace.Limits, version int64) (uint64, error) {
	if err := l.Validate(); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	res, err := s.Propose(ctx, &namespace.Command{Op: namespace.OpSetLimits, Version: version, Limits: &l})
	if err != nil {
		return 0, err
	}
	return res.Index, res.Err
}
