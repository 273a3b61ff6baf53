package adminapi

// JoinRequest is the body of POST /v1/join (a member joining, or
// refreshing its addresses).
type JoinRequest struct {
	ID         string `json:"id"`
	RaftAddr   string `json:"raft_addr"`
	ClientAddr string `json:"client_addr"`
	HTTPAddr   string `json:"http_addr"`
	APIAddr    string `json:"api_addr,omitempty"`
	// UpdateOnly refreshes the addresses of a current member and never adds
	// a new one: a member removed by an operator must not re-add itself.
	UpdateOnly bool `json:"update_only,omitempty"`
	// Replace lets an admin take the id or raft address of a live member:
	// that member is removed first. Without it such a join is refused
	// (session.ErrMemberExists).
	Replace bool `json:"replace,omitempty"`
}

// HashReply is the body of GET /v1/hash.
type HashReply struct {
	Member string `json:"member"`
	Index  uint64 `json:"index"`
	Hash   string `json:"hash"`
}

// TicketKey is the body of GET /v1/ticket-key: a member's TLS session
// ticket key, asked for by the other members.
type TicketKey struct {
	Key string `json:"key"` // base64
}
