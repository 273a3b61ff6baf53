// Package session is latch's client↔server session layer: the wire messages
// and their msgpack codec, framing over QUIC streams, TLS and ALPN, the
// leader's lease table and the client's lease tracker. It knows nothing of
// raft or of the tree; it imports namespace only for the types (Stat,
// EventType, CreateFlags, Op) and sentinel errors that cross the wire, so an
// error keeps one identity end to end.
//
// # Connections and streams
//
// A client holds one QUIC connection (ALPN "latch/1", TLS 1.3 only) to one
// member. Every request is its own bidirectional stream, so a blocked
// request (a lock wait, a watch) never delays the others:
//
//	client: open stream, write one Request frame, close the write side
//	server: read the frame and the end of the stream (ReadRequest), answer
//	        with one Response frame and close (Reply), or, for MsgWatch and
//	        MsgLock, write frames (WriteResponse) and end with Reply
//
// Client side: Dial, Hello (the first request on every connection), then
// RoundTrip for unary requests and OpenStreaming for Watch and Lock. When
// a request's ctx ends, the stream is reset both ways; the server learns it
// from the stream's Context and drops the work (a lock waiter withdraws, a
// watch ends). StreamReader.Close does the same on purpose.
//
// The mux stream: a stream per request costs datagrams (quic-go sends a
// MAX_STREAMS frame in a packet of its own as each incoming stream ends,
// and that packet wants acks of its own) and allocations on both sides.
// When the server's Hello answer has FeatureMux, RoundTrip sends unary
// requests of at most MuxMaxFrame bytes on one long-lived stream instead,
// opened by the first call (its first frame is MsgMux): each request
// carries a call id (Request.Call, from 1, never reused on the
// connection), a reader goroutine hands each answer (Response.Call) to its
// call, answers come in any order. A call whose ctx ends returns at once
// and sends MsgCancel; the server cancels the handler and answers nothing.
// When the mux stream breaks, every call on it fails as its own stream
// would have (a *quic.StreamError when only the stream ended, the
// connection's error when that closed) and the next call opens a new one.
// An answer without a call id is the server's answer to the stream itself
// (it was refused, ErrBusy): every call on it gets that answer. Server
// side, ReadRequest returns a MsgMux frame at once and NewMuxServer serves
// the rest: Next reads calls (handling cancels; a call without an id, a
// call id not above the last one (ids only increase, so an answer names
// one call only) or an unreadable frame is an error: close the
// connection; a request above the server's MaxFrameSize is answered
// ErrFrameTooLarge), Reply answers each once under a write lock with a
// deadline. Config.DisableMux turns it off on either side. Writes on the
// mux stream gather, on both sides: the goroutine that takes the write
// lock yields once before it writes, and the calls (answers) made in the
// meantime join its write instead of waiting for the lock, so the
// requests of goroutines that call together, and the answers of calls a
// raft batch finished together, share a packet (about half the datagrams
// per write of 64 proposers on 8 connections).
//
// Server side: Listen, Accept, conn.AcceptStream, then per stream:
//
//	defer session.EndStream(str)  // both directions finished, always
//	req, err := session.ReadRequest(str, conn.MaxFrameSize())
//	if err != nil { session.Reject(str, err); return }
//	... session.Reply(str, resp)
//
// quic-go retires a stream, and gives the client back its stream credit,
// only when both directions are finished; EndStream guarantees that on
// every path, including a client that cancelled. A handler of a streaming
// request selects on str.Context().Done() to notice the client leaving.
// The first request must be Hello: answer a failed CheckHello with
// ErrorResponse and close the connection with ConnVersion.
//
// # Frames and codec
//
// A frame is a 4-byte big-endian body length and a msgpack body (one
// Request or Response, a map keyed by the short names in the codec tags).
// Tags and code numbers are the protocol: testdata/wire holds golden
// encodings that fail the tests on any change. Unknown map keys are
// ignored, so a newer peer may add fields; a new meaning needs a new
// ProtocolVersion.
//
// Readers never trust the peer: a length above the reader's MaxFrameSize is
// ErrFrameTooLarge before anything is allocated, a body buffer grows only
// as bytes arrive, a truncated frame wraps io.ErrUnexpectedEOF, and any
// decoding failure (bad msgpack, wrong types, trailing bytes, nesting
// deeper than 16, a panic inside the decoder) is ErrMalformed. Decoded
// slices and strings are copies, never views of pooled buffers. Encoders,
// decoders and buffers are pooled; the msgpack handle is configured once
// and read-only afterwards.
//
// go-msgpack's reflection codec defines the bytes; the messages of the hot
// paths are written and read by hand (msgcodec.go), byte for byte the
// same, and everything else by reflection. A field added to Request or
// Response goes into msgcodec.go's encoder, or into its list of fields it
// declines; TestMsgCodecEveryField fails until then. The hand codec
// writes and reads through namespace/msgp.
//
// LockMode is namespace.LockMode (an alias): one type, whose number the
// wire carries.
//
// Version fields follow namespace: 0 means "expect version 0"; send
// namespace.AnyVersion (-1) to skip the check.
//
// Watch streams: the first frame acknowledges the watch with Rev (the
// revision it starts after) and no events; later frames carry Events in
// revision order. An event of type EventResync (255, never produced by
// namespace) tells the client that events were lost (history gone, or it
// fell behind its buffer) and it must re-read from Rev. A watch with
// WatchLocks also gets the lock events of the requests under its path
// (Path: the request node; Token, Mode, Cause of an end, Waiter and
// WaiterSession of a conflicting request). Lock streams: a
// LockQueued frame with Node and Rev, then LockGranted with Token, or an
// error frame; the stream ends at the grant (a held lock is no request in
// flight), and the lock's end is told on the connection's one
// MsgLockNotices stream (LockGone, Node, why). A client that gives up
// waiting resets the stream (the server withdraws a request it still
// waits on) and also withdraws the request itself with MsgLockRelease (by
// Node, or by RequestID): a reset that reaches the server after it wrote
// the grant finds the stream over, and only the client knows that the
// grant was never delivered. A client re-attaches to its
// request after a reconnection with MsgLock{Node}, and names each new
// request with a RequestID so that a retry after a lost answer gets the
// same request. A frame with a non-zero Code always ends a stream. With
// FeatureLockCall a new request goes as MsgLockCall, a unary request (on
// the mux stream): a lock granted at once is its answer; a request that
// must wait answers LockQueued, and the client waits on MsgLock{Node}.
//
// # Errors
//
// Code numbers pair with sentinels in one table (errors.go). The server
// sends ErrorResponse(err) (CodeOf picks the code of the first sentinel err
// matches, CodeInternal otherwise); the client's Response.Err returns an
// *Error that errors.Is that same sentinel and carries the server's
// message, and for ErrNotLeader the leader's client address (NotLeader
// builds one on the server). A code this build does not know becomes
// ErrUnknownCode with the number. ErrSessionExpired is namespace's own
// sentinel. Transport failures are plain errors of RoundTrip, distinct from
// error responses.
//
// # Leases
//
// LeaseTable (leader memory; keepalives never touch the log) keeps one
// deadline per session in a min-heap: Add, Renew and Remove are O(log n).
// The reaper takes Expired(max) batches, oldest deadline first; a session
// returned there is "expiring" and Renew refuses it, so a keepalive racing
// with the reaper is never acknowledged for a session whose expiry is on
// its way to the log (Requeue hands a batch back when the commit failed).
// A new leader calls ResetAll before expiring anything: every session gets
// a full TTL from then, so none expires earlier than TTL after its last
// acknowledged keepalive. Wake signals a reaper sleeping until an old
// NextDeadline that an earlier deadline appeared.
//
// Tracker (client memory) turns keepalive acks into what the application
// may rely on. An ack of a keepalive sent at s granting TTL d proves the
// lease lasts until s+d (Deadline; measured from the send, so it is never
// longer than the server's). Past Deadline with no newer ack the state is
// Jeopardy: the session may be dead, the client looks for a leader for a
// grace period of one TTL; an ack that moves Deadline past now makes it
// Reconnected; the grace running out, or the server answering
// ErrSessionExpired, ErrUnknownSession or namespace.ErrNoSession
// (IsExpiry), makes it Expired, closes Done and Events. The tracker runs
// no timers: the client's loop sleeps until NextCheck and calls Poll.
// Events never blocks the tracker: a slow reader loses the oldest
// transitions, never the latest. A lock grant that arrives after Deadline
// must be treated as lost.
//
// Both take a Clock; ManualClock drives them in tests, here and elsewhere.
//
// # TLS
//
// ServerTLS with a client CA requires and verifies client certificates
// (mutual TLS); Identity names the client by certificate CN, else first
// URI SAN, else first DNS SAN. Listen and Dial clone the given config and
// pin TLS 1.3 and the ALPN, so a peer of another major version fails the
// handshake. EnsureDevCerts writes a throwaway PKI (ECDSA P-256 CA and its
// key, server certificate for 127.0.0.1, ::1 and localhost) into a
// directory and reuses it while it is complete and more than a week from
// expiry; DevCerts.Member and DevCerts.Client issue member and client
// certificates from it on demand (each dev client its own identity).
//
// Members (pki.go): a cluster CA signs member certificates (no CN, one URI
// SAN latch://member/<id>, server and client use), client certificates (CN
// = identity; "latch://" identities are refused) and server certificates.
// MemberID reads a certificate's member id; PeerMember is the verified
// member id of a TLS peer, the one test of "is this peer a member" every
// layer uses. MemberTLS builds the configs of raft (mutual TLS 1.3, ALPN
// latch-raft/1, only members accepted either way, no host name checked:
// raft dials by address) and of the admin endpoint (member certificate
// served, client certificates of the cluster CA verified when offered).
// VerifyChain is the one chain check (raft and admin peers, the HTTP API's
// clients and forwarding members, a member's certificate file): the leaf
// verifies through the intermediates sent with it, so a CA with an
// intermediate works the same everywhere. latch cert (cmd/latch) and
// --dev use the same CA type.
//
// # Transport defaults
//
// Config: MaxFrameSize 1 MiB + 64 KiB, MaxIncomingStreams 10000 (streams
// open at once per connection), KeepAlivePeriod 5s (clients: servers
// send no keep-alive pings of their own), MaxIdleTimeout 30s,
// HandshakeTimeout 3s (silence during the handshake; the whole handshake
// is bounded by twice that), FailureTimeout off (clients: the fast
// watchdog while a call waits, liveness.go; servers echo its pings on
// every connection). Zero fields take the default; Validate names the
// bad field. Clients accept no streams from the server. Flow-control windows (not in Config) are sized for frames, not
// bulk transfer: 128 KiB per stream to start (a largest value at once),
// growing to 2 MiB (or a largest frame), 512 KiB per connection growing
// to twice that: what one connection can make its peer buffer.
//
// # Resumption, no 0-RTT
//
// Connections do not use 0-RTT: early data can be replayed by anyone on
// the path, and the first requests on a connection (Hello, session open or
// resume, lock requests) change state, so a replay could act twice.
// They do resume: a client config keeps a TLS session-ticket cache
// (NewTicketCache), and the members share their ticket keys
// (Listener.SetTicketKeys, fed by the server's member-only ticket-key
// route), so after a failover a client resumes on the new leader with the
// old one's ticket: a resumption saves the certificate signature and its
// verification, not the key exchange.
package session
