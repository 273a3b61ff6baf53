package admin

// What the admin endpoint needs of the member it serves, declared here
// where it is used (package server implements it in admin_member.go).
// Errors are the member's own: the endpoint maps them to status codes
// (writeError), the member's sentinels through Config.Errors.

import (
	"context"
	"io"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/adminapi"
)

// Member is the member the admin endpoint serves from.
type Member interface {
	Health
	Cluster
	Membership
	Backups
	Settings
	Hashes
	Access
}

// Health is what /healthz and /readyz report.
type Health interface {
	// Alive is nil while the member runs and its raft has not shut down.
	Alive() error
	// Ready is nil when the member knows a leader and has applied
	// everything it knows to be committed.
	Ready() error
}

// Cluster is the member's view of itself and the cluster.
type Cluster interface {
	Status() (adminapi.Status, error)
	Members() ([]adminapi.MemberStatus, error)
	// LeaderElsewhere names the leader a leader-only request goes to;
	// elsewhere is false when this member answers it itself (it leads, or
	// it is not running and the call says so). id and httpAddr are ""
	// when unknown.
	LeaderElsewhere() (id, httpAddr string, elsewhere bool)
	// Snapshot takes a raft snapshot now.
	Snapshot(ctx context.Context) error
}

// Membership changes the raft configuration. Leader only.
type Membership interface {
	// Join adds or updates a member as by may (Caller.MayChange).
	Join(ctx context.Context, req adminapi.JoinRequest, by Caller) error
	// Remove removes member id as by may.
	Remove(ctx context.Context, id string, by Caller) error
	AddLearner(ctx context.Context, id, raftAddr string) error
	Promote(ctx context.Context, id string) error
}

// Backup is the namespace at one index, streamed into a backup file.
type Backup interface {
	Index() uint64
	WriteTo(w io.Writer) (int64, error)
	Release()
}

// Backups saves and restores the namespace.
type Backups interface {
	// LinearizableRead returns once this member has applied every write
	// acknowledged before the call.
	LinearizableRead(ctx context.Context) error
	// OpenBackup opens the namespace as applied now.
	OpenBackup() (Backup, error)
	// RestoreBackup replaces the cluster's state with the backup file at
	// path; a cluster holding nodes only with force.
	RestoreBackup(ctx context.Context, path string, force bool) (adminapi.BackupInfo, error)
}

// Settings are the replicated cluster settings.
type Settings interface {
	// Limits returns the settings in force and their revision (0: never
	// set through the log).
	Limits() (revision uint64, l namespace.Limits)
	// WaitReady returns once this member is the ready leader.
	WaitReady(ctx context.Context) error
	// SetLimits replaces the settings if they are still revision version
	// (namespace.AnyVersion: whatever they are) and returns the new
	// revision.
	SetLimits(ctx context.Context, l namespace.Limits, version int64) (uint64, error)
}

// Hashes are the state hashes the members compare.
type Hashes interface {
	// Hash is this member's state hash at index, if it still has one.
	Hash(index uint64) (string, bool)
	// HashCheck proposes a hash check and returns its index.
	HashCheck(ctx context.Context) (uint64, error)
}

// Access is who may do what, and the secrets members share.
type Access interface {
	// IsAdmin reports whether identity (of a verified certificate) is a
	// cluster admin; member identities never are.
	IsAdmin(identity string) bool
	// Refused counts one refused admin request.
	Refused()
	// TicketKey is this member's TLS session ticket key.
	TicketKey() []byte
}

// Faults are the fault injection controls of a member started with fault
// injection (Config.Faults; nil without).
type Faults interface {
	// SetBlocked replaces the raft addresses the member exchanges no
	// traffic with (empty heals).
	SetBlocked(addrs []string)
	// Blocked returns them, sorted.
	Blocked() []string
	// HoldWrites holds every raft log write while on.
	HoldWrites(on bool)
}
