package raftnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/adminapi"
	"github.com/prometheus/client_golang/prometheus"
)

// Cross-member state hash check, after etcd's corruption check but driven
// by the log, so every member hashes exactly the same index however far
// behind it is:
//
//   - Every Config.HashCheckInterval the ready leader proposes
//     OpHashCheck (POST /v1/hash-check does it at once). Each member,
//     when it applies that entry, gets a read view of its state at that
//     index and hashes it off the apply path (store.Snapshot.Hash: the
//     whole state, every value's checksum verified on the way).
//   - It serves the hash at GET /v1/hash?index=N and fetches the other
//     members' hashes for the same index (waiting up to hashWait for
//     members that are behind).
//   - A peer whose hash differs raises the alarm: the gauge
//     latch_state_hash_mismatch counts such peers and one error log line
//     names the peer, the index and both hashes.
//   - When a majority of the cluster agrees on a hash other than this
//     member's, this member is the one that diverged: it fails (the
//     server's storagefault.go) and refuses to serve.
//
// A member that failed keeps answering GET /v1/hash until latchd exits,
// so the others can name it.

// hashWait bounds how long a member waits for the others' hashes.
const hashWait = 30 * time.Second

// hashesKept is how many recent hashes a member keeps to answer peers.
const hashesKept = 16

// HashCheckConfig is what a HashChecker works with: this member, the
// recorded members and their admin endpoints, and the member's failure.
type HashCheckConfig struct {
	Self string // this member's id
	Log  *slog.Logger
	// Ctx ends when the member closes.
	Ctx context.Context
	// Go runs f as a goroutine the member owns (Close waits for it).
	Go func(f func())
	// Fail stops the member from serving for good (a storage fault while
	// hashing, or ErrStateDiverged).
	Fail func(error)
	// Members lists the recorded members (their admin addresses).
	Members func() ([]namespace.Member, error)
	// PeerAdmin is the client for other members' admin endpoints.
	PeerAdmin func(timeout time.Duration) *adminapi.Client
	// Matches and Mismatches count comparisons with a peer
	// (latch_state_hash_checks_total); Differing is how many peers
	// differed at the last comparison with each (latch_state_hash_mismatch).
	Matches, Mismatches prometheus.Counter
	Differing           prometheus.Gauge
}

// HashChecker hashes this member's state at each applied OpHashCheck
// (Take), keeps the recent hashes for the other members (Get), compares
// with theirs, and proposes the checks while this member leads (Loop).
type HashChecker struct {
	cfg HashCheckConfig

	mu     sync.Mutex
	busy   bool // a hash is being computed
	hashes map[uint64]namespace.StateHash
	order  []uint64 // indexes in hashes, oldest first
	// differs holds the peers whose hash differed at the last comparison
	// with them: the alarm gauge counts them.
	differs map[string]bool
}

// NewHashChecker returns a checker that has hashed nothing yet.
func NewHashChecker(cfg HashCheckConfig) *HashChecker {
	return &HashChecker{cfg: cfg, hashes: map[uint64]namespace.StateHash{}, differs: map[string]bool{}}
}

// Take receives the view an applied OpHashCheck produced, on the FSM
// goroutine (FSMConfig.HashView); the work happens on a goroutine of its
// own.
func (h *HashChecker) Take(r *namespace.Result) {
	view := r.HashView
	h.mu.Lock()
	if h.busy {
		h.mu.Unlock()
		view.Release()
		h.cfg.Log.Warn("state hash check skipped: the previous one is still running", "index", r.Index)
		return
	}
	h.busy = true
	h.mu.Unlock()
	h.cfg.Go(func() {
		sum, err := view.Hash()
		view.Release()
		h.mu.Lock()
		h.busy = false // hashing is what must not pile up; comparisons end by hashWait
		h.mu.Unlock()
		if err != nil {
			if errors.Is(err, namespace.ErrStorage) {
				h.cfg.Fail(err)
			} else if !errors.Is(err, namespace.ErrClosed) {
				h.cfg.Log.Warn("state hash failed", "index", r.Index, "err", err)
			}
			return
		}
		h.record(r.Index, sum)
		h.compare(h.cfg.Ctx, r.Index, sum)
	})
}

func (h *HashChecker) record(index uint64, sum namespace.StateHash) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hashes[index] = sum
	h.order = append(h.order, index)
	if len(h.order) > hashesKept {
		delete(h.hashes, h.order[0])
		h.order = h.order[1:]
	}
}

// Get returns this member's hash at index, if it is one of the recent
// ones (GET /v1/hash).
func (h *HashChecker) Get(index uint64) (namespace.StateHash, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sum, ok := h.hashes[index]
	return sum, ok
}

// compare fetches the other members' hashes at index and judges.
func (h *HashChecker) compare(ctx context.Context, index uint64, mine namespace.StateHash) {
	cfg := &h.cfg
	members, err := cfg.Members()
	if err != nil {
		cfg.Log.Warn("state hash check: members", "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, hashWait)
	defer cancel()
	ac := cfg.PeerAdmin(2 * time.Second)
	defer ac.CloseIdleConnections()
	type answer struct{ id, hash string }
	answers := make(chan answer, len(members))
	asked := 0
	for _, m := range members {
		if m.ID == cfg.Self || m.HTTPAddr == "" {
			continue
		}
		asked++
		go func() {
			answers <- answer{m.ID, fetchHash(ctx, ac, m.HTTPAddr, index)}
		}()
	}
	// Judge as answers come: a member in the minority fails as soon as a
	// majority against it is known, before it could serve much more.
	votes := map[string][]string{mine.String(): {cfg.Self}}
	for range asked {
		a := <-answers
		if a.hash == "" {
			continue
		}
		votes[a.hash] = append(votes[a.hash], a.id)
		differs := a.hash != mine.String()
		counter := cfg.Matches
		if differs {
			counter = cfg.Mismatches
			cfg.Log.Error("state hash mismatch: members disagree on the state at the same applied index",
				"peer", a.id, "index", index, "hash", mine.String(), "peer_hash", a.hash)
		}
		counter.Inc()
		h.mu.Lock()
		if differs {
			h.differs[a.id] = true
		} else {
			delete(h.differs, a.id)
		}
		cfg.Differing.Set(float64(len(h.differs)))
		h.mu.Unlock()
		if ids := votes[a.hash]; differs && 2*len(ids) > len(members) {
			cfg.Fail(fmt.Errorf("%w: state hash at index %d is %s, but members %v agree on %s",
				ErrStateDiverged, index, mine, ids, a.hash))
		}
	}
}

// fetchHash polls a peer for its hash at index until it has one or ctx
// ends (the peer is behind, or gone: then "").
func fetchHash(ctx context.Context, ac *adminapi.Client, addr string, index uint64) string {
	for {
		var r adminapi.HashReply
		err := ac.Do(ctx, http.MethodGet, addr, "/v1/hash?index="+strconv.FormatUint(index, 10), nil, &r)
		if err == nil && r.Hash != "" {
			return r.Hash
		}
		select {
		case <-ctx.Done():
			return ""
		case <-time.After(100 * time.Millisecond): // the peer has not applied index yet
		}
	}
}

// Proposer is the member's log as the hash check loop sees it.
type Proposer interface {
	// IsLeader reports whether this member is the ready leader.
	IsLeader() bool
	Propose(ctx context.Context, cmd *namespace.Command) (*namespace.Result, error)
}

// Loop proposes OpHashCheck every interval (none when <= 0) while this
// member is the ready leader, each proposal bounded by applyTimeout,
// until Ctx ends.
func (h *HashChecker) Loop(interval, applyTimeout time.Duration, p Proposer) {
	if interval <= 0 {
		return
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-h.cfg.Ctx.Done():
			return
		case <-tick.C:
		}
		if !p.IsLeader() {
			continue
		}
		ctx, cancel := context.WithTimeout(h.cfg.Ctx, applyTimeout)
		if _, err := p.Propose(ctx, &namespace.Command{Op: namespace.OpHashCheck}); err != nil {
			h.cfg.Log.Warn("proposing a state hash check failed", "err", err)
		}
		cancel()
	}
}
