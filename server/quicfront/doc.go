// Package quicfront is a latch member's QUIC client front: the listener,
// the connections and their streams, the mux stream's calls, the routing
// of every request to the member's handler for its type, admission
// control of new connections, the admission queue, the answers to leader
// probes, the failed-resume limiter and the TLS session ticket keys the
// members share. It holds no request logic: the member installs a
// handler per message type (HandleUnary, HandleStream) and the HTTP API's
// requests run through the same handlers (Call). It does not import
// package server: it declares what it needs of a member in parts.go
// (Leadership, Requests, TicketKeys, made into Parts), which package
// server implements (server/front_member.go) and wires
// (server/front.go, openFront).
//
// # Use
//
//	f, err := quicfront.New(ctx, quicfront.Config{ID: "n1", Addr: ":7420", ...}, tlsConf, parts)
//	f.HandleUnary(session.MsgGet, get) // every type the member serves, before Start
//	f.Start()                          // accept, answer probes, watch the scheduler
//	resp, err := f.Call(ctx, f.NewConn(identity), req) // another front's request
//	f.Close()                          // ConnShutdown to every client
//
// ctx is the member's: when it ends, every goroutine of the front ends
// (they run on Parts.Go, whose owner waits for them).
//
// # Files
//
//	front.go        Front: listener, accept loop, routing (dispatch, Call)
//	conn.go         Conn: Hello, streams, request slots, the mux stream
//	workers.go      goroutines that run the mux stream's calls
//	admission.go    admission control of new connections (AdmissionConfig)
//	queue.go        the admission queue: slots reserved through probes
//	probe.go        probe answers; connections closed on a step-down
//	resumelimit.go  failed session resumes, per connection and per host
//	ticketkeys.go   the members' shared TLS session ticket keys
//	parts.go        Config, what a member gives (Parts), Stats
//
// Its tests run a front on loopback QUIC with a dev PKI and a fake member
// (front_test.go): routing, checks and probe answers need no raft and no
// store; package server's tests run it inside real members.
//
// # Decisions
//
//   - Connection: Hello first (else ErrVersion, then ConnVersion; garbage
//     first: ConnProtocol), within HandshakeTimeout plus
//     RequestReadTimeout. Then every stream is served in its own
//     goroutine, at most MaxRequestsPerConn at once (and MaxStreams on
//     all connections); more are refused at once with ErrBusy naming the
//     cap, never queued. A request frame must arrive within
//     RequestReadTimeout of its stream opening. A handler panic is logged
//     and answered with ErrInternal: no client input takes the member
//     down. More than MaxConns connections: the newest is closed with
//     ConnBusy. A connection with no session and no request for
//     IdleConnTimeout is closed.
//   - A request naming a session must come on a connection that opened
//     or resumed it (Conn.Attach; else ErrUnknownSession), except a
//     resume and a batched keepalive (answered per session). The member's
//     Requests.Check runs next (a path outside its cell), then the
//     handler; every error leaves as Requests.WireError made it.
//   - Mux stream (Hello offers FeatureMux and FeatureLockCall unless
//     Transport.DisableMux): one per connection, a newer one replaces
//     it; a new lock request rides it as MsgLockCall; it holds no request
//     slot, its calls do (the same caps, ErrBusy with the call's id). Each
//     call runs on a worker (a reused goroutine) through answer, like a
//     unary request on its own stream (a keepalive, which never waits, on
//     the goroutine that read it); streaming types are refused
//     (ErrMalformed). An answer not taken within 30s, or bad input
//     (unreadable frame, no call id, an id not above the last one, frame
//     above session.MuxMaxFrame), closes the connection with
//     ConnProtocol. The lock notices, mux and cache streams live as long
//     as their connection and hold no request slot.
//   - Admission control (admission.go) admits or refuses every new
//     connection attempt before any cryptography; the admission queue
//     (queue.go) gives a client that asks in its probe a slot on the same
//     schedule. Their design and measurements are in the files and in
//     package server's doc ("No leader change without a failure"). The
//     member's lease keeper reads RefusedWithin and TakingIn to hold
//     expiry while a reconnect storm is taken in.
//   - Probes (probe.go): any member answers whether it serves sessions
//     (Leadership.Serving) and names the leader it follows
//     (Leadership.LeaderClientAddr, "" when it cannot vouch for one); only
//     the serving leader reserves slots. When the member stops being the
//     ready leader every connection is closed with ConnNotLeader, so
//     clients look for the new leader at once.
//   - Failed resumes (resumelimit.go) are limited per connection and per
//     client host; the member's resume handler asks Conn.AllowResume
//     first and reports a wrong secret with Conn.ResumeFailed. A right
//     secret is never refused on the host's account.
//   - Ticket keys (ticketkeys.go): each member seals tickets with its own
//     random key and opens any member's, fetched through
//     TicketKeys.PeerTicketKeys, so a client resumes its TLS session on a
//     new leader at a quarter of a full handshake's cost.
package quicfront
