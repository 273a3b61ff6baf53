// Package httpapi is a latch member's HTTP/JSON API and web console: a
// second front beside the QUIC one. It holds no logic of its own: every
// request becomes the session.Request the QUIC front would have received
// and runs through the same handlers (Conn.Call), or, for the streaming
// calls (locks, watches), through the same lock acquisition engine
// (Locks.Acquire) and watch hub (Watches). It does not import package
// server: it declares what it needs of a member in member.go (Member,
// made of small interfaces) and package server implements it
// (server/api_member.go) and wires it (server/api.go: the listener, the
// http.Server, the console's sampler).
//
// # Use
//
//	a, err := httpapi.New(httpapi.Config{ID: "n1", ClientTLS: tlsConf, ...}, member)
//	ln = tls.NewListener(ln, a.TLSConfig())
//	srv := &http.Server{Handler: a.Handler(ln.Addr().String())}
//	go srv.Serve(ln)
//
// # Files
//
//	api.go          Config, New, routing, limits, bodies, session tokens
//	member.go       the interfaces a member implements
//	identity.go     the TLS it serves and who a request is for
//	forward.go      leader-only requests on a follower
//	gateway.go      gateway certificates; guard.go the Host names
//	cell.go         routes outside this member's cell
//	node.go         sessions, nodes, multi, members; txn.go transactions
//	lock.go         acquire, release, renew; leasewait.go implicit leases
//	lockqueue.go    queue listings; lockroute.go lock paths and views;
//	lockhistory.go  lock history; election.go elections
//	watch.go        Server-Sent Events: watches, election observation
//	console.go      the console, the OpenAPI document, the cluster view;
//	                console_stats.go the console's chart stream
//
// # Decisions
//
//   - It listens on its own TCP address, server.Config.APIAddr (latchd
//     --api-addr, default 127.0.0.1:7423; "" in Config: no API), with the
//     client front's certificate and client CA, so console users and
//     scripts need no admin certificate. With a client CA a client
//     certificate is required, as on QUIC; the identity is
//     session.Identity of the peer certificate.
//   - Any member serves any request: a follower forwards it to the
//     leader's API itself (API clients never see a redirect), presenting
//     this member's certificate and the caller's identity in the
//     Latch-Identity header. The leader believes that header only from a
//     peer whose certificate is a member's (isMemberCert); from anyone
//     else it is ignored, except from a gateway (gateway.go), whose
//     certificate comes from Config.GatewayCAs. A forwarded request is
//     never forwarded again: a member that is not the leader answers 503
//     with Latch-Retry, and the first member looks for the leader again
//     until ApplyTimeout.
//     Watches, election observation, stale reads (?stale=true on nodes,
//     children and stat) and the console's static files are served by the
//     member itself from its own applied state.
//   - Sessions: open returns a token "<id>.<secret hex>" that later
//     requests carry in the Latch-Session header; the secret is checked
//     on every request as a resume would check it. A lock request without
//     a session may give client_id and ttl_ms: it then holds the lock on an
//     implicit lease, a session of its own with TTL ttl_ms (clamped into
//     the session bounds) and a hold TTL of ttl_ms. The acquire answer's
//     lease_token (that session's token: its secret is in the log, so any
//     later leader checks it) is what renew and release need; client_id is
//     only a label the queue shows. Renew keeps both alive (and may change
//     ttl_ms), release closes that session.
//   - Errors are {"code": session.Code, "name", "message"} with an HTTP
//     status per code (apiwire.Status). The member's errors reach the API
//     as wire errors already (Member), so the API writes them as they
//     are. Bodies are JSON objects of at most Config.MaxBody bytes with no
//     unknown fields.
//   - The pieces latch gateway (cmd/latch) serves too, without a member,
//     are leaf packages: apiwire (the guard, the error shape, the
//     headers), console (the static files) and apispec (the OpenAPI
//     document, which TestAPIOpenAPIRoutes holds to the route table).
package httpapi
