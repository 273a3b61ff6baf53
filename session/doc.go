// Package session is latch's client↔server session layer: the wire messages
// and their msgpack codec, framing over QUIC streams, TLS and ALPN, the
// leader's lease table and the client's lease tracker. It knows nothing of
// raft or of the tree; it imports namespace only for the types and sentinel
// errors that cross the wire, so an error keeps one identity end to end.
//
// The decisions below are recorded here because DESIGN.md leaves them open.
package session
