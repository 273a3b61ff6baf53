// Package lease is the leader's session leases and their expiry: the
// Keeper renews leases on keepalives without touching the log, counts
// sessions against the session caps, and commits the expiry of sessions
// whose lease ran out.
//
// A member makes one Keeper (New) and gives it what it declares here:
// a Clock (monotonic: a wall-clock step must not end or extend a lease),
// its Leadership, its session Store, a Proposer for expiry commands, the
// Admission signals of reconnect storms, and Refuse for cap refusals. It
// feeds it every applied batch (Applied, on the FSM goroutine) and runs
// Lead for every term it wins. Handlers call Serving before a session
// request, Reserve and Opened around an open, Renew on a keepalive.
//
// Decisions:
//
//   - Leases live in the leader's memory (session.LeaseTable); keepalives
//     never touch the log. Only open, close and expiry are commands.
//   - A new leader does not know the old one's deadlines, so Lead loads
//     every session with a full TTL from the load, plus a reconnect grace
//     of twice the time admitting one connection per session takes at
//     Config.HandshakeRate (at most MaxReconnectGrace): a session never
//     expires earlier than TTL after its last acknowledged keepalive,
//     whatever the number of elections. It serves nothing (Serving
//     answers session.ErrNoLeader, which clients retry) until the table
//     is loaded in the current term.
//   - Expiry holds (expiryCutoff), Chubby's grace period made to last as
//     long as a reconnect storm does: within MaxReconnectGrace of the
//     load, once admission control refused a client for load since it,
//     nothing expires while clients are still being taken in; in steady
//     state, while admission refuses clients for load, a session expires
//     only MaxReconnectGrace past its deadline (its client may be among
//     those refused). A dead client's session ends at most TTL +
//     MaxReconnectGrace (+ ExpiryTick) after the leader change.
//   - The reaper sleeps until the next deadline, at most ExpiryTick (so a
//     moved clock is noticed), and expires in batches of ExpiryBatch. An
//     expiry that did not commit goes back on the schedule; one the
//     Proposer says a deposed member tried ends the term's reaping.
//   - A session opened by a command whose handler never answered (its
//     client left) is leased from the applied event, so it still expires.
//     Opened is idempotent: the first of the observer and the handler
//     counts it.
//   - Session caps are the leader's bookkeeping, never Apply's: a session
//     counts against its QuotaKey (its identity, or the host of a client
//     without a certificate) from Reserve until it is gone; a reservation
//     is replaced by the open session, never counted twice.
//
// The keeper reads no clock but its Clock and holds no member: its tests
// drive it with a clock they move and a fake member.
package lease
