package server

// The member as its QUIC front (package quicfront) sees it: the parts the
// front declares, given by this member, and the front's config types and
// defaults under the names this package's Config uses.

import (
	"context"
	"encoding/base64"
	"net/http"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/server/quicfront"
	"github.com/latch-io/latch/session"
)

// AdmissionConfig bounds how fast a member lets new client connections
// in (Config.Admission; package quicfront runs admission control).
type AdmissionConfig = quicfront.AdmissionConfig

// Admission defaults (quicfront's).
const (
	DefaultHandshakeRate           = quicfront.DefaultHandshakeRate
	DefaultHandshakeBurst          = quicfront.DefaultHandshakeBurst
	DefaultMaxHandshakesInFlight   = quicfront.DefaultMaxHandshakesInFlight
	DefaultFailedHandshakesPerHost = quicfront.DefaultFailedHandshakesPerHost
	DefaultProbesPerHost           = quicfront.DefaultProbesPerHost
	DefaultLagLimit                = quicfront.DefaultLagLimit
	// DefaultMaxFailedResumesPerHost is Config.MaxFailedResumesPerHost's
	// default.
	DefaultMaxFailedResumesPerHost = quicfront.DefaultMaxFailedResumesPerHost
)

// frontMember is the member of f as its QUIC front sees it. Every part is
// read when used: the front is made before the lease keeper and the lock
// service.
type frontMember struct{ f *front }

var (
	_ quicfront.Leadership = frontMember{}
	_ quicfront.Requests   = frontMember{}
	_ quicfront.TicketKeys = frontMember{}
)

func (m frontMember) Serving() error { return m.f.keep.Serving() }

// LeaderClientAddr names the leader this member follows and can vouch for
// (followedLeader), when it is another member.
func (m frontMember) LeaderClientAddr() string {
	s := m.f.s
	if id := s.followedLeader(); id != "" && id != s.cfg.ID {
		return s.memberInfo(id).ClientAddr
	}
	return ""
}

func (m frontMember) SubscribeLeadership() (<-chan bool, func()) { return m.f.s.SubscribeLeadership() }

// Check refuses a request naming a path outside this member's cell
// (cell.go).
func (m frontMember) Check(req *session.Request) error { return m.f.checkCell(req) }

func (m frontMember) WireError(err error) error { return wireError(err) }

func (m frontMember) Served(t session.MsgType, start time.Time, err error, unary bool) {
	m.f.s.metrics.ops.request(t, start, err, unary)
}

// PeerTicketKeys fetches the other members' ticket keys over their admin
// endpoint (GET /v1/ticket-key, with this member's certificate).
func (m frontMember) PeerTicketKeys(ctx context.Context) ([][32]byte, bool) {
	s := m.f.s
	if s.raft == nil {
		return nil, false
	}
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return nil, false
	}
	ac := s.peerAdmin(2 * time.Second)
	defer ac.CloseIdleConnections()
	keys := [][32]byte{}
	var ids []string
	for _, srv := range f.Configuration().Servers {
		if srv.ID != raft.ServerID(s.cfg.ID) {
			ids = append(ids, string(srv.ID))
		}
	}
	slices.Sort(ids)
	complete := true
	for _, id := range ids {
		info := s.memberInfo(id)
		if info.HTTPAddr == "" {
			complete = false
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var a adminapi.TicketKey
		err := ac.Do(ctx, http.MethodGet, info.HTTPAddr, "/v1/ticket-key", nil, &a)
		cancel()
		b, derr := base64.StdEncoding.DecodeString(a.Key)
		if err != nil || derr != nil || len(b) != 32 {
			complete = false
			continue
		}
		keys = append(keys, [32]byte(b))
	}
	return keys, complete
}

// followedLeader returns the leader this member can vouch for: itself
// while raft says it leads, else the leader raft follows while it has not
// timed it out (heard from it within a heartbeat timeout) and did not see
// it crash (raftnode.CrashDetector). A crashed leader is not named: until the
// election ends, redirects and probe answers say "no leader yet" rather
// than send clients to a dead member. (Half a heartbeat timeout, as
// before, made a follower that a load starved for 250ms deny a healthy
// leader, and the clients that asked polled on, probing harder.)
func (s *Server) followedLeader() (id string) {
	if s.raft == nil {
		return ""
	}
	if s.raft.State() == raft.Leader {
		return s.cfg.ID
	}
	_, lid := s.raft.LeaderWithID()
	if lid == "" || time.Since(s.raft.LastContact()) > s.cfg.HeartbeatTimeout || lid == s.crash.DeadLeader() {
		return ""
	}
	return string(lid)
}
