package server

// This member as the admin endpoint sees it (admin.Member), and the
// endpoint's wiring: its configuration, the member's error sentinels and,
// with Config.FaultInjection, the fault controls.

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/hashicorp/raft"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/admin"
	"github.com/latch-io/latch/server/adminapi"
)

// adminCaller is who made an admin request (admin.Caller).
type adminCaller = admin.Caller

// adminHandler serves the admin endpoint: health, metrics, status and
// membership, backups, settings, profiles, faults.
func (s *Server) adminHandler() http.Handler {
	cfg := admin.Config{
		ID: s.cfg.ID, DataDir: s.cfg.DataDir, Log: s.log,
		Clock: s.cfg.Clock, SnapshotMinInterval: s.cfg.SnapshotMinInterval,
		Errors: admin.Errors{BadRequest: ErrBadRequest, NotFresh: ErrNotFresh, Unavailable: []error{ErrClosed, ErrNotStarted}},
	}
	if s.faults != nil {
		cfg.Faults = adminFaults{s}
	}
	return admin.New(cfg, adminMember{s})
}

// adminMember implements admin.Member for s.
type adminMember struct{ s *Server }

var (
	_ admin.Member    = adminMember{}
	_ admin.Faults    = adminFaults{}
	_ admin.NotLeader = (*NotLeaderError)(nil)
)

// LeaderAdmin names the leader and its admin address for the admin
// endpoint (admin.NotLeader).
func (e *NotLeaderError) LeaderAdmin() (id, httpAddr string) { return e.LeaderID, e.LeaderHTTPAddr }

func (m adminMember) Alive() error {
	if err := m.s.running(); err != nil {
		return err
	}
	if m.s.raft.State() == raft.Shutdown {
		return errors.New("shut down")
	}
	return nil
}

func (m adminMember) Ready() error { return m.s.ready() }

// ready is nil when this member knows a leader and has applied everything
// it knows to be committed.
func (s *Server) ready() error {
	if err := s.running(); err != nil {
		return err
	}
	if _, lid := s.raft.LeaderWithID(); lid == "" {
		return errors.New("no leader known")
	}
	if s.raft.State() == raft.Leader && !s.IsLeader() {
		return errors.New("leader has not committed its term barrier yet")
	}
	if !s.caughtUp() {
		return fmt.Errorf("catching up: applied %d, commit %d", s.fsmApplied(), s.raft.CommitIndex())
	}
	return nil
}

func (m adminMember) Status() (adminapi.Status, error)          { return m.s.Status() }
func (m adminMember) Members() ([]adminapi.MemberStatus, error) { return m.s.Members() }
func (m adminMember) Snapshot(ctx context.Context) error        { return m.s.Snapshot(ctx) }

// LeaderElsewhere: a member that leads, or is not running, answers
// leader-only requests itself.
func (m adminMember) LeaderElsewhere() (id, httpAddr string, elsewhere bool) {
	s := m.s
	if s.running() != nil || s.raft.State() == raft.Leader {
		return "", "", false
	}
	var nl *NotLeaderError
	errors.As(s.notLeader(), &nl)
	return nl.LeaderID, nl.LeaderHTTPAddr, true
}

func (m adminMember) Join(ctx context.Context, req adminapi.JoinRequest, by admin.Caller) error {
	return m.s.addMember(ctx, req, by)
}

func (m adminMember) Remove(ctx context.Context, id string, by admin.Caller) error {
	return m.s.removeMember(ctx, id, by)
}

func (m adminMember) AddLearner(ctx context.Context, id, raftAddr string) error {
	return m.s.AddLearner(ctx, id, raftAddr)
}

func (m adminMember) Promote(ctx context.Context, id string) error { return m.s.Promote(ctx, id) }

func (m adminMember) LinearizableRead(ctx context.Context) error { return m.s.LinearizableRead(ctx) }

func (m adminMember) OpenBackup() (admin.Backup, error) {
	snap, err := m.s.store.Snapshot()
	if err != nil {
		return nil, err
	}
	return snap, nil
}

func (m adminMember) RestoreBackup(ctx context.Context, path string, force bool) (adminapi.BackupInfo, error) {
	return m.s.RestoreBackup(ctx, path, force)
}

func (m adminMember) Limits() (uint64, namespace.Limits) {
	return m.s.store.LimitsRevision(), m.s.store.Limits()
}

func (m adminMember) WaitReady(ctx context.Context) error { return m.s.waitReady(ctx) }

func (m adminMember) SetLimits(ctx context.Context, l namespace.Limits, version int64) (uint64, error) {
	return m.s.SetLimits(ctx, l, version)
}

func (m adminMember) Hash(index uint64) (string, bool) {
	sum, ok := m.s.hashes.Get(index)
	if !ok {
		return "", false
	}
	return sum.String(), true
}

// HashCheck proposes a state hash check now.
func (m adminMember) HashCheck(ctx context.Context) (uint64, error) {
	res, err := m.s.Propose(ctx, &namespace.Command{Op: namespace.OpHashCheck})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return 0, err
	}
	return res.Index, nil
}

func (m adminMember) IsAdmin(identity string) bool { return m.s.isAdmin(identity) }
func (m adminMember) Refused()                     { m.s.countRefused("admin") }

// TicketKey is this member's TLS session ticket key (quicfront/ticketkeys.go).
func (m adminMember) TicketKey() []byte {
	k := m.s.front.quic.TicketKey()
	return k[:]
}

// adminFaults are the fault controls of a member started with
// Config.FaultInjection: its raft stream layer and raft log store.
type adminFaults struct{ s *Server }

func (f adminFaults) SetBlocked(addrs []string) { f.s.faults.SetBlocked(addrs) }
func (f adminFaults) Blocked() []string         { return f.s.faults.Blocked() }
func (f adminFaults) HoldWrites(on bool)        { f.s.raftStore.HoldWrites(on) }
