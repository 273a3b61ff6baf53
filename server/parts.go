package server

import (
	"context"
	"errors"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/clock"
	"github.com/latch-io/latch/server/lease"
	"github.com/latch-io/latch/server/quicfront"
	"github.com/latch-io/latch/server/raftnode"
	"github.com/latch-io/latch/server/watch"
	"github.com/latch-io/latch/session"
)

// The server's parts in subpackages (watch, lease, raftnode) declare what
// they need of the member as small interfaces; this file gives them the
// member's.

// leaseMember is the member as the lease keeper sees it: its leadership
// (lease.Leadership), its sessions (lease.Store) and its log
// (lease.Proposer).
type leaseMember struct{ s *Server }

var (
	_ lease.Leadership  = leaseMember{}
	_ lease.Store       = leaseMember{}
	_ lease.Proposer    = leaseMember{}
	_ lease.Admission   = (*quicfront.Front)(nil)
	_ watch.Log         = (*raftnode.FSM)(nil)
	_ raftnode.Proposer = (*Server)(nil) // the hash check's loop
)

func (m leaseMember) Term() uint64 {
	_, term, _ := m.s.leader.Get()
	return term
}

func (m leaseMember) IsLeader() bool { return m.s.IsLeader() }

func (m leaseMember) Leading() error {
	if err := m.s.running(); err != nil {
		return err
	}
	if !m.s.IsLeader() {
		return m.s.notLeader()
	}
	return nil
}

func (m leaseMember) Session(id uint64) (namespace.SessionInfo, error) { return m.s.store.Session(id) }

func (m leaseMember) Sessions() ([]namespace.SessionInfo, error) { return m.s.store.Sessions() }

func (m leaseMember) Restores() uint64 { return m.s.fsm.Restores() }

func (m leaseMember) Propose(ctx context.Context, cmd *namespace.Command) (*namespace.Result, error) {
	return m.s.Propose(ctx, cmd)
}

// Deposed: Propose answers a *NotLeaderError once this member is not the
// leader, ErrClosed once it stops.
func (m leaseMember) Deposed(err error) bool {
	var nl *NotLeaderError
	return errors.As(err, &nl) || errors.Is(err, ErrClosed)
}

// DefaultMaxReconnectGrace is Config.MaxReconnectGrace's default.
const DefaultMaxReconnectGrace = 45 * time.Second

// newLeaseKeeper returns the front's lease keeper, on the monotonic clock.
func newLeaseKeeper(f *front) *lease.Keeper {
	s := f.s
	cfg := &s.cfg
	return lease.New(lease.Config{
		ExpiryTick: cfg.ExpiryTick, ExpiryBatch: cfg.ExpiryBatch, ApplyTimeout: cfg.ApplyTimeout,
		MaxReconnectGrace: cfg.MaxReconnectGrace, HandshakeRate: cfg.Admission.HandshakeRate,
		MaxSessions: cfg.MaxSessions, MaxSessionsPerIdentity: cfg.MaxSessionsPerIdentity, MaxAnonymousSessions: cfg.MaxAnonymousSessions,
	}, lease.Parts{
		Clock:     clock.Mono(cfg.Monotonic),
		Leader:    leaseMember{s},
		Store:     leaseMember{s},
		Proposer:  leaseMember{s},
		Admission: f.quic, // what admission control saw of clients coming in
		Log:       s.log,
		Refuse: func(name string, limit int, who string) error {
			f.capRefusals.counter(name).Add(1)
			return capError(session.ErrTooManySessions, name, limit, who)
		},
	})
}
