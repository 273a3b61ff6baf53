package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/session"
)

// MemberStatus is one member as raft's configuration and the replicated
// metadata know it.
type MemberStatus = adminapi.MemberStatus

// joinRequest is the body of POST /v1/join.
type joinRequest = adminapi.JoinRequest

// memberState is the membership loop's view.
type memberState struct {
	wakeC chan struct{}

	mu       sync.Mutex
	leader   string // leader id the loop last acted on
	inConfig bool   // this member has appeared in a raft configuration

	removedC    chan struct{} // closed when this member learns it was removed
	removedOnce sync.Once
}

func (m *memberState) init() {
	m.wakeC = make(chan struct{}, 1)
	m.removedC = make(chan struct{})
}

// wake asks the loop to re-check now.
func (m *memberState) wake() {
	select {
	case m.wakeC <- struct{}{}:
	default:
	}
}

func (m *memberState) lastLeader() raft.ServerID {
	m.mu.Lock()
	defer m.mu.Unlock()
	return raft.ServerID(m.leader)
}

// self is this member's metadata record.
func (s *Server) self() namespace.Member {
	return namespace.Member{ID: s.cfg.ID, RaftAddr: s.raftAddr, ClientAddr: s.cfg.ClientAddr, HTTPAddr: s.httpAddr, APIAddr: s.apiAddr()}
}

// memberInfo returns the recorded metadata of id (this member's own
// addresses are always known).
func (s *Server) memberInfo(id string) namespace.Member {
	if id == s.cfg.ID {
		return s.self()
	}
	ms, err := s.store.Members()
	if err != nil {
		return namespace.Member{ID: id}
	}
	for _, m := range ms {
		if m.ID == id {
			return m
		}
	}
	return namespace.Member{ID: id}
}

func (s *Server) recorded(id string) (namespace.Member, bool) {
	ms, err := s.store.Members()
	if err != nil {
		return namespace.Member{}, false
	}
	for _, m := range ms {
		if m.ID == id {
			return m, true
		}
	}
	return namespace.Member{}, false
}

// Members lists the raft configuration joined with the recorded metadata.
func (s *Server) Members() ([]MemberStatus, error) {
	if err := s.running(); err != nil {
		return nil, err
	}
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("latch: raft configuration: %w", err)
	}
	meta, err := s.store.Members()
	if err != nil {
		return nil, err
	}
	byID := map[string]namespace.Member{}
	for _, m := range meta {
		byID[m.ID] = m
	}
	_, lid := s.raft.LeaderWithID()
	var out []MemberStatus
	for _, srv := range f.Configuration().Servers {
		id := string(srv.ID)
		m := byID[id]
		if id == s.cfg.ID {
			m = s.self()
		}
		delete(byID, id)
		out = append(out, MemberStatus{
			ID: id, RaftAddr: string(srv.Address), ClientAddr: m.ClientAddr, HTTPAddr: m.HTTPAddr, APIAddr: m.APIAddr,
			Suffrage: suffrageName(srv.Suffrage), Leader: srv.ID == lid,
		})
	}
	for _, m := range meta {
		if _, stale := byID[m.ID]; stale {
			out = append(out, MemberStatus{ID: m.ID, RaftAddr: m.RaftAddr, ClientAddr: m.ClientAddr, HTTPAddr: m.HTTPAddr, APIAddr: m.APIAddr})
		}
	}
	return out, nil
}

func suffrageName(s raft.ServerSuffrage) string {
	switch s {
	case raft.Voter:
		return "voter"
	case raft.Nonvoter:
		return "nonvoter"
	case raft.Staging:
		return "staging"
	}
	return ""
}

// leaderOnly returns nil when this member is the ready leader.
func (s *Server) leaderOnly(ctx context.Context) error {
	if err := s.running(); err != nil {
		return err
	}
	return s.waitReady(ctx)
}

// AddMember adds id as a voter at raftAddr and records its client and
// admin addresses, acting as an admin. Leader only; idempotent. An id or
// raft address of another live member is ErrMemberExists unless replace.
func (s *Server) AddMember(ctx context.Context, id, raftAddr, clientAddr, httpAddr string, replace bool) error {
	return s.addMember(ctx, joinRequest{ID: id, RaftAddr: raftAddr, ClientAddr: clientAddr, HTTPAddr: httpAddr, Replace: replace}, adminCaller{Admin: true})
}

func (s *Server) addMember(ctx context.Context, req joinRequest, by adminCaller) error {
	s.membershipMu.Lock()
	defer s.membershipMu.Unlock()
	if req.ID == "" {
		return fmt.Errorf("%w: member id required", ErrBadRequest)
	}
	if err := checkDialable(req.RaftAddr); err != nil {
		return fmt.Errorf("%w: raft_addr: %v", ErrBadRequest, err)
	}
	if err := by.MayChange(req.ID, req.Replace); err != nil {
		return err
	}
	if err := s.leaderOnly(ctx); err != nil {
		return err
	}
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("latch: raft configuration: %w", err)
	}
	exact, known := false, false
	var holder raft.ServerID // another member at the joiner's raft address
	var at raft.ServerAddress
	for _, srv := range f.Configuration().Servers {
		switch {
		case string(srv.ID) == req.ID:
			known, at = true, srv.Address
			// A learner joining at its address stays a learner: only
			// Promote makes it a voter.
			exact = srv.Address == raft.ServerAddress(req.RaftAddr) && srv.Suffrage != raft.Staging
		case srv.Address == raft.ServerAddress(req.RaftAddr):
			holder = srv.ID
		}
	}
	// A join must not take over a live member: three made-up voters would
	// cost the cluster its quorum, and a re-pointed address its traffic.
	switch {
	case holder != "" && !req.Replace:
		return fmt.Errorf("%w: raft address %s belongs to member %s (remove it first, or have an admin replace it)", session.ErrMemberExists, req.RaftAddr, holder)
	case known && !exact && !req.UpdateOnly && !req.Replace:
		return fmt.Errorf("%w: member %s is live at %s (remove it first, or have an admin replace it)", session.ErrMemberExists, req.ID, at)
	}
	if holder != "" {
		s.log.Warn("admin replaces the member at the joiner's raft address", "old", holder, "new", req.ID, "by", by.String())
		if err := waitFuture(ctx, s.raft.RemoveServer(holder, 0, s.cfg.ApplyTimeout)); err != nil {
			return s.proposeError(err)
		}
	}
	if !exact {
		if req.UpdateOnly && !known {
			return fmt.Errorf("%w: %s", namespace.ErrNoMember, req.ID)
		}
		// AddVoter also moves a known member to a new address.
		s.log.Info("adding member", "id", req.ID, "raft_addr", req.RaftAddr)
		if err := waitFuture(ctx, s.raft.AddVoter(raft.ServerID(req.ID), raft.ServerAddress(req.RaftAddr), 0, s.cfg.ApplyTimeout)); err != nil {
			return s.proposeError(err)
		}
	}
	want := namespace.Member{ID: req.ID, RaftAddr: req.RaftAddr, ClientAddr: req.ClientAddr, HTTPAddr: req.HTTPAddr, APIAddr: req.APIAddr}
	return s.recordMember(ctx, want)
}

// recordMember proposes want's metadata unless it is already recorded.
func (s *Server) recordMember(ctx context.Context, want namespace.Member) error {
	if got, ok := s.recorded(want.ID); ok && got == want {
		return nil
	}
	res, err := s.Propose(ctx, &namespace.Command{Op: namespace.OpSetMember, Member: &want})
	if err != nil {
		return err
	}
	return res.Err
}

// RemoveMember removes id from the raft configuration and forgets its
// metadata. Leader only. Removing the leader itself makes it step down.
func (s *Server) RemoveMember(ctx context.Context, id string) error {
	return s.removeMember(ctx, id, adminCaller{Admin: true})
}

func (s *Server) removeMember(ctx context.Context, id string, by adminCaller) error {
	if err := by.MayChange(id, false); err != nil {
		return err
	}
	s.membershipMu.Lock()
	defer s.membershipMu.Unlock()
	if id == "" {
		return fmt.Errorf("%w: member id required", ErrBadRequest)
	}
	if err := s.leaderOnly(ctx); err != nil {
		return err
	}
	_, inConfig, err := s.configured(id)
	if err != nil {
		return err
	}
	_, recorded := s.recorded(id)
	if !inConfig && !recorded {
		return fmt.Errorf("%w: %s", namespace.ErrNoMember, id)
	}
	removeMeta := func() error {
		if !recorded {
			return nil
		}
		res, err := s.Propose(ctx, &namespace.Command{Op: namespace.OpRemoveMember, Member: &namespace.Member{ID: id}})
		if err != nil {
			return err
		}
		if res.Err != nil && !errors.Is(res.Err, namespace.ErrNoMember) {
			return res.Err
		}
		return nil
	}
	removeServer := func() error {
		if !inConfig {
			return nil
		}
		s.log.Info("removing member", "id", id)
		if err := waitFuture(ctx, s.raft.RemoveServer(raft.ServerID(id), 0, s.cfg.ApplyTimeout)); err != nil {
			return s.proposeError(err)
		}
		return nil
	}
	// The configuration changes first, so a metadata refresh racing with the
	// removal is refused (UpdateOnly needs a current member). A leader
	// removing itself steps down when the change commits, so it forgets its
	// metadata while it still can.
	order := []func() error{removeServer, removeMeta}
	if id == s.cfg.ID {
		order = []func() error{removeMeta, removeServer}
	}
	for _, step := range order {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// memberLoop keeps this member's metadata registered with the leader, and
// for a --join member asks to be added. It backs off while it fails and
// re-checks when leadership changes.
func (s *Server) memberLoop() {
	const minBackoff, maxBackoff, recheck = 100 * time.Millisecond, 5 * time.Second, 30 * time.Second
	backoff := minBackoff
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		wait := recheck
		if err := s.registerOnce(); err != nil {
			s.log.Debug("member registration pending", "err", err)
			wait = backoff
			backoff = min(2*backoff, maxBackoff)
		} else {
			backoff = minBackoff
		}
		timer.Reset(wait)
		select {
		case <-s.stop:
			return
		case <-s.member.wakeC:
			backoff = minBackoff
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// errPending is registerOnce's "not done yet, try again".
var errPending = errors.New("pending")

// registerOnce does one step of registration and returns nil when nothing
// is left to do.
func (s *Server) registerOnce() error {
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	r := s.raft
	if r.State() == raft.Leader {
		if !s.IsLeader() {
			return errPending // the leadership loop wakes us when ready
		}
		return s.recordMember(ctx, s.self())
	}
	_, lid := r.LeaderWithID()
	s.member.mu.Lock()
	s.member.leader = string(lid)
	s.member.mu.Unlock()

	inConfig := false
	if f := r.GetConfiguration(); f.Error() == nil {
		for _, srv := range f.Configuration().Servers {
			inConfig = inConfig || string(srv.ID) == s.cfg.ID
		}
	}
	s.member.mu.Lock()
	if inConfig {
		s.member.inConfig = true
	}
	everIn := s.member.inConfig
	s.member.mu.Unlock()
	if everIn && lid == "" {
		// A member removed while it was cut off never hears of it: its
		// configuration still names it, and no leader answers it.
		if s.checkRemoved(ctx) {
			return nil
		}
		return errPending // keep asking while no leader is known
	}

	req := joinRequest{ID: s.cfg.ID, RaftAddr: s.raftAddr, ClientAddr: s.cfg.ClientAddr, HTTPAddr: s.httpAddr, APIAddr: s.apiAddr()}
	if !inConfig {
		// Only a member started with --join and no prior state asks to be
		// added; anything else outside the configuration was removed.
		if s.cfg.Join == "" || s.hadState || everIn {
			return nil
		}
		target := s.cfg.Join
		if lid != "" {
			if m := s.memberInfo(string(lid)); m.HTTPAddr != "" {
				target = m.HTTPAddr
			}
		}
		if err := s.postJoin(ctx, target, req); err != nil {
			return err
		}
		// The leader answers once the change committed: this member was
		// in the configuration, even if it is removed before this loop
		// looks again, and must then not join a second time.
		s.member.mu.Lock()
		s.member.inConfig = true
		s.member.mu.Unlock()
		return errPending // confirm by seeing ourselves in the configuration
	}
	if got, ok := s.recorded(s.cfg.ID); ok && got == s.self() {
		return nil
	}
	if lid == "" {
		return errPending
	}
	leaderHTTP := s.memberInfo(string(lid)).HTTPAddr
	if leaderHTTP == "" {
		return errPending // the leader records itself first
	}
	req.UpdateOnly = true
	err := s.postJoin(ctx, leaderHTTP, req)
	if errors.Is(err, namespace.ErrNoMember) {
		return nil // removed meanwhile
	}
	return err
}

// postJoin sends req to the admin endpoint at addr as this member;
// followers redirect it to the leader and the client follows.
func (s *Server) postJoin(ctx context.Context, addr string, req joinRequest) error {
	ac := s.peerAdmin(10 * time.Second)
	defer ac.CloseIdleConnections()
	err := adminError(ac.Do(ctx, http.MethodPost, addr, "/v1/join", req, nil))
	if err != nil && !errors.Is(err, namespace.ErrNoMember) {
		return fmt.Errorf("%w: %w", ErrJoin, err)
	}
	return err
}

// adminError gives an admin endpoint's error answer its identity back:
// the wire error its wire_code names (session.ErrAdminDenied, ...), or
// namespace.ErrNoMember for "no_member"; other errors are returned as
// they are.
func adminError(err error) error {
	var re *adminapi.ReplyError
	if !errors.As(err, &re) {
		return err
	}
	if re.Reply.WireCode != 0 {
		return fmt.Errorf("latch: admin %s: %w", re.Addr, session.Code(re.Reply.WireCode).Err(re.Reply.Error))
	}
	if re.Reply.Code == "no_member" {
		return fmt.Errorf("%w: %s", namespace.ErrNoMember, re.Reply.Error)
	}
	return err
}
