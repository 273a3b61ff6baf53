package server

import (
	"time"

	"github.com/latch-io/latch/server/adminapi"
)

// peerAdmin is the client a member uses to call other members' admin
// endpoints (joins, address refreshes, removal checks, state hash
// comparison): HTTPS presenting this member's certificate, accepting only
// a member's (session.MemberTLS.AdminClient). Close its idle connections
// when done.
func (s *Server) peerAdmin(timeout time.Duration) *adminapi.Client {
	return adminapi.NewClient(s.memberTLS.AdminClient(), timeout)
}
