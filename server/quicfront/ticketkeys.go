package quicfront

import (
	"crypto/rand"
	"time"
)

// Session ticket keys shared by the members. Every member seals the TLS
// session tickets it issues to clients with a key of its own (random,
// made at start, in memory only) and opens tickets sealed by any member's:
// the member fetches the others' keys over the admin endpoint, which only
// members may call for this (GET /v1/ticket-key; Parts.Tickets), and the
// front hands them to its listener.
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

// TicketKey is this member's ticket key, which the other members fetch
// (the admin endpoint's GET /v1/ticket-key serves it to members only).
func (f *Front) TicketKey() [32]byte { return f.ticketKey }

// shareTicketKeys keeps the client listener's ticket keys: this member's
// first (it seals), then every other member's it could fetch.
func (f *Front) shareTicketKeys() {
	shared := false
	for {
		complete := f.refreshTicketKeys()
		wait := ticketRefresh
		if !complete {
			wait = ticketRetry
		}
		if complete && !shared {
			// From here on a client resumes on this member with any
			// member's ticket: operators (and tests) can tell when.
			shared = true
			f.log.Info("TLS ticket keys shared with every member")
		}
		select {
		case <-f.ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// refreshTicketKeys fetches the other members' keys and installs them; it
// reports whether every member answered.
func (f *Front) refreshTicketKeys() bool {
	others, complete := f.parts.Tickets.PeerTicketKeys(f.ctx)
	if others == nil && !complete {
		return false // the member could not tell who the others are yet
	}
	f.ln.SetTicketKeys(append([][32]byte{f.ticketKey}, others...))
	return complete
}
