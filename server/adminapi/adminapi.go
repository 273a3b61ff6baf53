// Package adminapi holds the JSON documents of a member's admin HTTP API
// (/v1/status, /v1/members, the reply of every call that is not data) and
// the build information every binary reports.
//
// It is its own package, with no dependency beyond the standard library, so
// that the latch CLI (status, member, snapshot, chaos, bench) can decode
// what a member says without linking the server, raft or badger. The server
// encodes these same types: there is one definition of each document.
package adminapi

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Status is a member's view of itself and the cluster (GET /v1/status).
type Status struct {
	ID               string         `json:"id"`
	State            string         `json:"state"` // Follower, Candidate, Leader, Shutdown
	Ready            bool           `json:"ready"` // leader whose term barrier committed
	LeaderID         string         `json:"leader_id"`
	LeaderRaftAddr   string         `json:"leader_raft_addr"`
	Term             uint64         `json:"term"`
	AppliedIndex     uint64         `json:"applied_index"`
	CommitIndex      uint64         `json:"commit_index"`
	LastLogIndex     uint64         `json:"last_log_index"`
	SnapshotIndex    uint64         `json:"snapshot_index"`
	SnapshotRestores uint64         `json:"snapshot_restores"` // snapshots installed since start
	RaftAddr         string         `json:"raft_addr"`
	ClientAddr       string         `json:"client_addr"`
	HTTPAddr         string         `json:"http_addr"`
	Members          []MemberStatus `json:"members"`
	// PID is the member's process id, for tools on the same host (latch
	// bench storm signals the leader with it).
	PID int `json:"pid"`
	// Version and Build describe the latchd binary answering.
	Version string `json:"version"`
	Build   Build  `json:"build"`

	// NoSpace is true while the member's data dir has less free space
	// than --min-free-mib: it refuses writes, and a leader with it hands
	// leadership to a member without it (server/raftnode/handoff.go).
	NoSpace bool `json:"no_space,omitempty"`
}

// MemberStatus is one member as raft's configuration and the replicated
// metadata know it.
type MemberStatus struct {
	ID         string `json:"id"`
	RaftAddr   string `json:"raft_addr"`
	ClientAddr string `json:"client_addr,omitempty"`
	HTTPAddr   string `json:"http_addr,omitempty"`
	APIAddr    string `json:"api_addr,omitempty"` // the HTTP/JSON API
	// Suffrage is "voter", "nonvoter", "staging", or "" for metadata of a
	// member no longer in the raft configuration.
	Suffrage string `json:"suffrage"`
	Leader   bool   `json:"leader"`
}

// Reply is the JSON body of every admin API answer that is not data.
type Reply struct {
	OK    bool   `json:"ok,omitempty"`
	Error string `json:"error,omitempty"`
	// Code is machine-readable: not_leader, no_leader, no_member,
	// bad_request, ..., or the name of a wire error (AdminDenied,
	// MemberExists, SnapshotTooSoon) whose number is WireCode.
	Code string `json:"code,omitempty"`
	// WireCode is the session.Code of a wire error, so a Go caller can
	// give the error its identity back (session.Code(WireCode).Err).
	WireCode uint16 `json:"wire_code,omitempty"`
	LeaderID string `json:"leader_id,omitempty"`
	// LeaderHTTP is the leader's admin address; a redirect also names it
	// in Location.
	LeaderHTTP string `json:"leader_http,omitempty"`
	Index      uint64 `json:"index,omitempty"`
	// Warning is something the operator should know about a change that
	// succeeded (e.g. an even number of voters).
	Warning string `json:"warning,omitempty"`
}

// Build says which source a binary was built from, as the Go toolchain
// recorded it (runtime/debug.ReadBuildInfo).
type Build struct {
	// Version is the module version: a tag such as v1.2.0 for `go install
	// ...@v1.2.0`, a pseudo-version for @latest between tags, "(devel)" for
	// a build inside a checkout.
	Version   string `json:"version"`
	GoVersion string `json:"go_version"`
	// Revision, Time and Modified come from the VCS of a checkout build
	// (empty for `go install ...@version`, where Version says it all).
	Revision string `json:"vcs_revision,omitempty"`
	Time     string `json:"vcs_time,omitempty"`
	Modified bool   `json:"vcs_modified,omitempty"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
}

// ThisBuild is the build of the running binary.
func ThisBuild() Build {
	b := Build{Version: "(unknown)", GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if info.Main.Version != "" {
		b.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is one line: "v1.2.0 (go1.26.1 linux/amd64)" or, for a checkout
// build, "(devel) 1a2b3c4d5e6f+dirty 2026-11-23T10:00:00Z (go1.26.1 linux/amd64)".
func (b Build) String() string {
	s := b.Version
	if b.Revision != "" {
		rev := b.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if b.Modified {
			rev += "+dirty"
		}
		s += " " + rev
		if b.Time != "" {
			s += " " + b.Time
		}
	}
	return fmt.Sprintf("%s (%s %s/%s)", s, b.GoVersion, b.OS, b.Arch)
}

// AddMemberRequest is the body of POST /v1/members/add: put a member into
// the raft configuration before (or while) its latchd starts with --join.
type AddMemberRequest struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	// Learner adds a non-voter: it receives the log but does not count
	// for quorum or elections until promoted.
	Learner bool `json:"learner,omitempty"`
}

// MemberRequest is the body of POST /v1/members/promote and /v1/remove.
type MemberRequest struct {
	ID string `json:"id"`
}

// MembersReply is the answer of GET /v1/members and of a membership change.
type MembersReply struct {
	Members []MemberStatus `json:"members"`
	// Warning is set when the configuration deserves a second look (an
	// even number of voters).
	Warning string `json:"warning,omitempty"`
}

// VoterWarning returns what an operator should hear about the voters of
// members, or "". An even number of voters tolerates no more failures than
// one voter fewer, and a split into two halves leaves neither a majority.
func VoterWarning(members []MemberStatus) string {
	voters := 0
	for _, m := range members {
		if m.Suffrage == "voter" {
			voters++
		}
	}
	if voters > 0 && voters%2 == 0 {
		return fmt.Sprintf("%d voters: an even number tolerates no more failures than %d (a majority is %d); add or remove one voter, or add members as learners",
			voters, voters-1, voters/2+1)
	}
	return ""
}
