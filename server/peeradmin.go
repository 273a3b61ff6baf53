package server

import (
	"time"

	"github.com/latch-io/latch/server/adminapi"
)

// peerAdmin is the client a member uses to call other members' admin
// endpoints (removal checks, state hash comparison): one place to give it
// the members' transport security.
func (s *Server) peerAdmin(timeout time.Duration) *adminapi.Client {
	return adminapi.NewClient(nil, timeout)
}
