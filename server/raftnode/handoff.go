package raftnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latch-io/latch/server/adminapi"
)

// A leader that cannot write hands leadership to a member that can.
// Raft elects on liveness, not on a working disk, so a leader whose
// storage cannot take writes would otherwise stay leader while the
// cluster serves nothing that needs it:
//
//   - Disk full (diskfull.go): below MinFreeSpace the leader refuses
//     proposals and its FSM waits, so new sessions, writes and the
//     linearizable reads that wait for its FSM stop too. Each disk poll
//     (DiskPoll) that finds it full and leading, it asks the other voters
//     for their status (GET /v1/status) and transfers leadership to the
//     most up-to-date one that reports space (no_space false), with
//     raft's LeadershipTransferToServer: the leader brings the target's
//     log up to date, then tells it to start its election at once. So a
//     full leader is replaced within a poll, a status round trip and one
//     election, well under a second on a LAN. When no voter has space it
//     stays leader and keeps refusing writes; the warning says so.
//   - A storage fault (the server's storagefault.go): the failing member
//     hands over to the same kind of target before raft stops, or to
//     raft's own choice (the most up-to-date follower) when no status
//     answers.
//   - A disk that stops answering (stall.go): a raft log write that has
//     not returned after StorageStallTimeout makes the member fail; its
//     leader loop is stuck in that write, so the hand-over cannot run, and
//     latchd exits at once so that the others elect as after a crash.
//
// The old leader goes on as a follower: with a full disk it stays
// behind (its FSM waits) and catches up from the log when space returns;
// nothing acknowledged is lost, since every entry was committed by a
// majority that includes members with space.

// handOffQuery bounds how long a hand-over waits for the other members'
// status.
const handOffQuery = time.Second

var (
	// errNoHandOffTarget: no other voter answered with free space.
	errNoHandOffTarget = errors.New("latch: no other voter reports free space")
	// errNoMemberAddrs: no other voter's admin address is recorded.
	errNoMemberAddrs = errors.New("latch: no other voter's admin address is known")
)

// HandOffConfig is what a HandOff works with.
type HandOffConfig struct {
	Self string // this member's id
	Log  *slog.Logger
	// Ctx ends when the member closes; Go runs an owned goroutine.
	Ctx context.Context
	Go  func(f func())
	// ElectionTimeout bounds a transfer, with the status round.
	ElectionTimeout time.Duration
	// AdminAddr returns member id's recorded admin address ("" when
	// unknown).
	AdminAddr func(id string) string
	// PeerAdmin is the client for other members' admin endpoints.
	PeerAdmin func(timeout time.Duration) *adminapi.Client
}

// HandOff hands leadership to a member that can write: in the background
// for the disk poll (Start, Reset), or before a stop (BeforeStop). Give
// it raft (SetRaft) once raft runs.
type HandOff struct {
	cfg  HandOffConfig
	raft atomic.Pointer[raft.Raft]
	// One background hand-over at a time; a failure is logged once until
	// Reset.
	running atomic.Bool
	warned  atomic.Bool
}

// NewHandOff returns a HandOff with no raft yet.
func NewHandOff(cfg HandOffConfig) *HandOff { return &HandOff{cfg: cfg} }

// SetRaft gives the hand-over the member's raft.
func (h *HandOff) SetRaft(r *raft.Raft) { h.raft.Store(r) }

// toWriter transfers leadership to the most up-to-date voter with
// free space. It returns nil at once when this member does not lead. It
// needs the other members' admin addresses from the applied member
// records: a member whose disk was full before it ever applied them (a
// new cluster) has none and returns errNoMemberAddrs rather than hand
// leadership to a member that may be as full (two full members would
// pass it back and forth).
func (h *HandOff) toWriter(ctx context.Context, r *raft.Raft, reason string) error {
	if r.State() != raft.Leader {
		return nil
	}
	target, err := h.target(ctx, r)
	if err != nil {
		return err
	}
	h.cfg.Log.Warn("handing leadership over", "reason", reason,
		"to", target.ID, "its_last_log_index", target.LastLogIndex)
	f := r.LeadershipTransferToServer(raft.ServerID(target.ID), raft.ServerAddress(target.RaftAddr))
	if err := f.Error(); err != nil {
		return fmt.Errorf("latch: leadership transfer to %s: %w", target.ID, err)
	}
	return nil
}

// target asks every other voter for its status and returns the one
// with free space and the longest log.
func (h *HandOff) target(ctx context.Context, r *raft.Raft) (adminapi.Status, error) {
	fut := r.GetConfiguration()
	if err := fut.Error(); err != nil {
		return adminapi.Status{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, handOffQuery)
	defer cancel()
	ac := h.cfg.PeerAdmin(handOffQuery)
	defer ac.CloseIdleConnections()
	answers := make(chan adminapi.Status)
	asked := 0
	for _, srv := range fut.Configuration().Servers {
		id := string(srv.ID)
		if id == h.cfg.Self || srv.Suffrage != raft.Voter {
			continue
		}
		addr := h.cfg.AdminAddr(id)
		if addr == "" {
			continue
		}
		asked++
		go func() {
			st, err := ac.Status(ctx, addr)
			if err != nil || st.ID != id || st.NoSpace || st.State != raft.Follower.String() {
				st = adminapi.Status{}
			}
			st.RaftAddr = string(srv.Address)
			answers <- st
		}()
	}
	if asked == 0 {
		return adminapi.Status{}, errNoMemberAddrs
	}
	var best adminapi.Status
	for range asked {
		st := <-answers
		if st.ID != "" && (best.ID == "" || st.LastLogIndex > best.LastLogIndex) {
			best = st
		}
	}
	if best.ID == "" {
		return best, fmt.Errorf("%w (asked %d)", errNoHandOffTarget, asked)
	}
	return best, nil
}

// Start hands leadership over in the background, for the disk poll: a
// poll never waits for a transfer, and one runs at a time.
func (h *HandOff) Start(reason string) {
	r := h.raft.Load()
	if r == nil || !h.running.CompareAndSwap(false, true) {
		return
	}
	h.cfg.Go(func() {
		defer h.running.Store(false)
		ctx, cancel := context.WithTimeout(h.cfg.Ctx, handOffQuery+2*h.cfg.ElectionTimeout)
		defer cancel()
		err := h.toWriter(ctx, r, reason)
		if err != nil && !h.warned.Swap(true) {
			h.cfg.Log.Warn("this leader cannot write and could not hand leadership over; it goes on refusing writes", "reason", reason, "err", err)
		}
	})
}

// Reset lets the next failure be logged again (the disk has space).
func (h *HandOff) Reset() { h.warned.Store(false) }

// BeforeStop is a planned or forced stop's hand-over (Close on SIGTERM, a
// storage fault): when this member leads and another voter exists, it
// transfers leadership to the most up-to-date voter with space, else to
// raft's own pick, so the successor campaigns at once instead of waiting
// out a timeout. It returns when the transfer ended (raft bounds it by an
// election timeout), true when leadership was handed over.
func (h *HandOff) BeforeStop(reason string) bool {
	r := h.raft.Load()
	if r == nil || r.State() != raft.Leader {
		return false
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	others := 0
	for _, srv := range f.Configuration().Servers {
		if srv.Suffrage == raft.Voter && srv.ID != raft.ServerID(h.cfg.Self) {
			others++
		}
	}
	if others == 0 {
		return false
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), handOffQuery+2*h.cfg.ElectionTimeout)
	err := h.toWriter(ctx, r, reason)
	cancel()
	if errors.Is(err, errNoHandOffTarget) || errors.Is(err, errNoMemberAddrs) {
		err = r.LeadershipTransfer().Error()
	}
	if err != nil {
		if !errors.Is(err, raft.ErrRaftShutdown) {
			h.cfg.Log.Warn("leadership transfer before stopping failed", "reason", reason, "err", err)
		}
		return false
	}
	_, to := r.LeaderWithID()
	h.cfg.Log.Info("leadership handed over before stopping", "reason", reason, "to", to, "took", time.Since(start))
	return true
}
