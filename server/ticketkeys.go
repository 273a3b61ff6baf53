package server

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"slices"
	"time"

	"github.com/hashicorp/raft"
	"github.com/latch-io/latch/server/adminapi"
)

// Session ticket keys shared by the members. Every member seals the TLS
// session tickets it issues to clients with a key of its own (random,
// made at start, in memory only) and opens tickets sealed by any member's:
// it fetches the others' keys over the admin endpoint, which only members
// may call for this (GET /v1/ticket-key), and hands them to its listener.
// After a failover the clients reconnect to the new leader with the ticket
// the old one gave them: a resumed handshake (no certificates signed or
// checked), about a quarter of a full one's CPU, so a reconnect storm
// costs the new leader a quarter of what it would (admission.go).
//
// A member holding another's key can mint tickets in that member's name,
// which is no more than it can do already: members share the cluster's
// state and serve the same clients. The keys never reach the log, a
// snapshot or a disk: a restarted member makes a new one, and tickets
// sealed with the old become full handshakes once.

// ticketRefresh is how often a member asks for the others' keys once it
// has them all; ticketRetry while one is missing.
const (
	ticketRefresh = 30 * time.Second
	ticketRetry   = time.Second
)

func newTicketKey() [32]byte {
	var k [32]byte
	if _, err := rand.Read(k[:]); err != nil {
		panic("latch: no randomness for a ticket key: " + err.Error())
	}
	return k
}

type ticketKeyAnswer = adminapi.TicketKey

// shareTicketKeys keeps the client listener's ticket keys: this member's
// first (it seals), then every other member's it could fetch.
func (s *Server) shareTicketKeys() {
	shared := false
	for {
		complete := s.refreshTicketKeys()
		wait := ticketRefresh
		if !complete {
			wait = ticketRetry
		}
		if complete && !shared {
			// From here on a client resumes on this member with any
			// member's ticket: operators (and tests) can tell when.
			shared = true
			s.log.Info("TLS ticket keys shared with every member")
		}
		select {
		case <-s.stop:
			return
		case <-time.After(wait):
		}
	}
}

// refreshTicketKeys fetches the other members' keys and installs them; it
// reports whether every member answered.
func (s *Server) refreshTicketKeys() bool {
	if s.raft == nil || s.front == nil {
		return false
	}
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	ac := s.peerAdmin(2 * time.Second)
	defer ac.CloseIdleConnections()
	keys := [][32]byte{s.ticketKey}
	var ids []string
	for _, srv := range f.Configuration().Servers {
		if srv.ID != raft.ServerID(s.cfg.ID) {
			ids = append(ids, string(srv.ID))
		}
	}
	slices.Sort(ids)
	complete := true
	for _, id := range ids {
		m := s.memberInfo(id)
		if m.HTTPAddr == "" {
			complete = false
			continue
		}
		ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
		var a ticketKeyAnswer
		err := ac.Do(ctx, http.MethodGet, m.HTTPAddr, "/v1/ticket-key", nil, &a)
		cancel()
		b, derr := base64.StdEncoding.DecodeString(a.Key)
		if err != nil || derr != nil || len(b) != 32 {
			complete = false
			continue
		}
		keys = append(keys, [32]byte(b))
	}
	s.front.ln.SetTicketKeys(keys)
	return complete
}
