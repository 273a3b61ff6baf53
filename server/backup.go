package server

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/hashicorp/raft"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/namespace/store"
	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/session"
)

// Backups (latch snapshot save / restore). A backup is the leader's
// namespace at one read timestamp after a linearizable read barrier, so it
// holds every write acknowledged before the save began, in the checksummed
// file format of adminapi. A restore starts a new cluster from one: it
// goes into a fresh cluster through raft's user restore (the leader takes
// the state and sends it to the followers as a snapshot; the raft index
// moves past the backup's, so revisions and fencing tokens keep rising).
// In the restored cluster:
//   - nodes, data, versions, revisions, ACL rules and lock queues are the
//     backup's;
//   - the member records are the new cluster's (the backup's are dropped);
//   - sessions are the backup's and get a full TTL from the restore; their
//     clients talk to the old cluster, so unless one reconnects to the new
//     cluster with its session's id and secret they expire after their TTL,
//     which deletes their ephemeral nodes, removes their lock requests and
//     releases the locks they held (the next waiter is granted after the
//     lock-delay, as on any expiry).

// ErrNotFresh is the answer to a restore into a cluster that holds data.
var ErrNotFresh = errors.New("latch: cluster is not empty")

// RestoreBackup replaces the state of this cluster, whose ready leader
// this member must be, with the backup at path (checked whole first). A
// cluster holding nodes is refused unless force: a restore is
// for starting a new cluster. It returns the backup's description.
func (s *Server) RestoreBackup(ctx context.Context, path string, force bool) (adminapi.BackupInfo, error) {
	info, err := checkBackup(path)
	if err != nil {
		return info, err
	}
	info, data, err := adminapi.ReadBackup(path)
	if err != nil {
		return info, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	defer data.Close()
	s.membershipMu.Lock() // member records are rewritten below
	defer s.membershipMu.Unlock()
	if err := s.leaderOnly(ctx); err != nil {
		return info, err
	}
	if !force {
		if err := s.checkFresh(); err != nil {
			return info, err
		}
	}
	ours, err := s.store.Members()
	if err != nil {
		return info, err
	}
	s.log.Warn("restoring backup: the cluster's state is replaced", "index", info.Index, "from", info.Member, "created", info.Created)
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: info.Index, Size: info.Size}
	if err := s.raft.Restore(meta, data, s.cfg.ApplyTimeout); err != nil {
		return info, s.proposeError(err)
	}
	// Sessions attached before the restore are gone (or, worse, a
	// backup's session has the same id): every client reconnects and
	// resumes with its secret, which only the backup's clients have.
	s.front.dropClients(session.ConnShutdown, "state restored from a backup")
	// The backup brought the old cluster's member records: put back ours.
	restored, err := s.store.Members()
	if err != nil {
		return info, err
	}
	for _, m := range restored {
		if !slices.ContainsFunc(ours, func(o namespace.Member) bool { return o.ID == m.ID }) {
			res, err := s.Propose(ctx, &namespace.Command{Op: namespace.OpRemoveMember, Member: &namespace.Member{ID: m.ID}})
			if err != nil {
				return info, err
			}
			if res.Err != nil && !errors.Is(res.Err, namespace.ErrNoMember) {
				return info, res.Err
			}
		}
	}
	for _, m := range ours {
		if err := s.recordMember(ctx, m); err != nil {
			return info, err
		}
	}
	s.member.wake()
	s.log.Info("backup restored", "index", info.Index, "applied_index", s.fsmApplied())
	return info, nil
}

// checkBackup checks the backup at path whole, its namespace snapshot
// included (store.CheckSnapshot), before anything is replaced: raft
// panics when its FSM refuses a user restore, and the snapshot it already
// wrote would then stop the member from starting again. The header's
// index must be the snapshot's own.
func checkBackup(path string) (adminapi.BackupInfo, error) {
	info, data, err := adminapi.ReadBackup(path)
	if err != nil {
		return info, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	defer data.Close()
	sum, err := store.CheckSnapshot(data)
	if err != nil {
		return info, fmt.Errorf("%w: backup refused, nothing was restored: %w", ErrBadRequest, err)
	}
	if sum.Index != info.Index {
		return info, fmt.Errorf("%w: backup refused, nothing was restored: its header says index %d, its state holds %d",
			ErrBadRequest, info.Index, sum.Index)
	}
	return info, nil
}

// checkFresh refuses a restore into a cluster that already holds nodes.
// Sessions do not count: a fresh cluster has the sessions of the clients
// talking to it (the restoring CLI's among them), and the restore drops
// them.
func (s *Server) checkFresh() error {
	st, err := s.store.Stat("/")
	if err != nil {
		return err
	}
	if st.NumChildren > 0 {
		return fmt.Errorf("%w: %d nodes under /: restore starts a new cluster from a backup; restore into a fresh one (or force it, which drops this state)",
			ErrNotFresh, st.NumChildren)
	}
	return nil
}
