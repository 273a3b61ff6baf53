// Package admin is a latch member's admin endpoint: the HTTPS routes of
// `latch status`, `latch member`, `latch snapshot`, `latch limits`, the
// chaos runner's fault injection, and the members' own calls to each
// other (joins, removals, ticket keys, state hashes), plus /healthz,
// /readyz, /metrics and /debug/pprof/. It holds the HTTP handling only:
// routes, who may call what, bodies, status codes, redirects to the
// leader. What a route does is the member's: it does not import package
// server and declares what it needs of a member in member.go (Member,
// made of small interfaces; Faults, given only with fault injection),
// which package server implements and wires (server/admin_member.go). The
// wire types and the client the CLI links are in package adminapi.
//
// # Who may call what (auth.go)
//
// Only certificates the TLS handshake verified against the cluster CA
// count. A Caller is a member (a member certificate, session.PeerMember)
// or an admin (Access.IsAdmin; member identities never are). adminOnly
// routes (member add/promote, backups, settings, hash checks, profiles)
// need an admin; memberOrAdmin routes (join, remove, snapshot, ticket key,
// faults) a member or an admin, and a member may join, update or remove
// only itself (Caller.MayChange). Every refusal is 403 "admin_denied",
// counted (Access.Refused) and logged, before any redirect.
//
// # Answers (admin.go)
//
// Leader-only routes on a follower answer 307 to the leader's admin
// address (clients re-send the body), 503 "no_leader" when none is known.
// Errors map to a status and an adminapi.Reply: a NotLeader error 503
// naming the leader, Config.Errors' sentinels 400/409/503, namespace's
// and session's errors their codes, anything else 500. Bodies are JSON of
// at most 64 KiB with no unknown fields (a restore upload: 8 GiB, to a
// file in Config.DataDir first). POST /v1/snapshot is spaced by
// Config.SnapshotMinInterval (429 with Retry-After).
//
// # Files
//
//	admin.go        Config, New and the routes, health, redirects, errors
//	member.go       the interfaces a member implements
//	auth.go         Caller, adminOnly, memberOrAdmin
//	members.go      status, members, join, remove, add, promote, snapshot
//	backup.go       backup download and restore upload
//	ops.go          limits, state hashes, ticket key, pprof, faults
package admin
