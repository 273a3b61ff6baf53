package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/adminapi"
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
//     member's, this member is the one that diverged: it fails
//     (storagefault.go) and refuses to serve.
//
// A member that failed keeps answering GET /v1/hash until latchd exits,
// so the others can name it.

// hashWait bounds how long a member waits for the others' hashes.
const hashWait = 30 * time.Second

// hashesKept is how many recent hashes a member keeps to answer peers.
const hashesKept = 16

type hashChecker struct {
	s *Server

	mu     sync.Mutex
	busy   bool // a hash is being computed
	hashes map[uint64]namespace.StateHash
	order  []uint64 // indexes in hashes, oldest first
	// differs holds the peers whose hash differed at the last comparison
	// with them: the alarm gauge counts them.
	differs map[string]bool
}

func newHashChecker(s *Server) *hashChecker {
	return &hashChecker{s: s, hashes: map[uint64]namespace.StateHash{}, differs: map[string]bool{}}
}

// take receives the view an applied OpHashCheck produced, on the FSM
// goroutine; the work happens on a goroutine of its own.
func (h *hashChecker) take(r *namespace.Result) {
	view := r.HashView
	h.mu.Lock()
	if h.busy {
		h.mu.Unlock()
		view.Release()
		h.s.log.Warn("state hash check skipped: the previous one is still running", "index", r.Index)
		return
	}
	h.busy = true
	h.mu.Unlock()
	h.s.goFunc(func() {
		sum, err := view.Hash()
		view.Release()
		h.mu.Lock()
		h.busy = false // hashing is what must not pile up; comparisons end by hashWait
		h.mu.Unlock()
		if err != nil {
			if errors.Is(err, namespace.ErrStorage) {
				h.s.fail(err)
			} else if !errors.Is(err, namespace.ErrClosed) {
				h.s.log.Warn("state hash failed", "index", r.Index, "err", err)
			}
			return
		}
		h.record(r.Index, sum)
		h.compare(h.s.ctx, r.Index, sum)
	})
}

func (h *hashChecker) record(index uint64, sum namespace.StateHash) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hashes[index] = sum
	h.order = append(h.order, index)
	if len(h.order) > hashesKept {
		delete(h.hashes, h.order[0])
		h.order = h.order[1:]
	}
}

func (h *hashChecker) get(index uint64) (namespace.StateHash, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sum, ok := h.hashes[index]
	return sum, ok
}

// hashReply is the body of GET /v1/hash.
type hashReply = adminapi.HashReply

// compare fetches the other members' hashes at index and judges.
func (h *hashChecker) compare(ctx context.Context, index uint64, mine namespace.StateHash) {
	s := h.s
	members, err := s.store.Members()
	if err != nil {
		s.log.Warn("state hash check: members", "err", err)
		return
	}
	registerIntegrityMetrics()
	ctx, cancel := context.WithTimeout(ctx, hashWait)
	defer cancel()
	ac := s.peerAdmin(2 * time.Second)
	defer ac.CloseIdleConnections()
	type answer struct{ id, hash string }
	answers := make(chan answer, len(members))
	asked := 0
	for _, m := range members {
		if m.ID == s.cfg.ID || m.HTTPAddr == "" {
			continue
		}
		asked++
		go func() {
			answers <- answer{m.ID, fetchHash(ctx, ac, m.HTTPAddr, index)}
		}()
	}
	// Judge as answers come: a member in the minority fails as soon as a
	// majority against it is known, before it could serve much more.
	votes := map[string][]string{mine.String(): {s.cfg.ID}}
	for range asked {
		a := <-answers
		if a.hash == "" {
			continue
		}
		votes[a.hash] = append(votes[a.hash], a.id)
		differs := a.hash != mine.String()
		result := "match"
		if differs {
			result = "mismatch"
			s.log.Error("state hash mismatch: members disagree on the state at the same applied index",
				"peer", a.id, "index", index, "hash", mine.String(), "peer_hash", a.hash)
		}
		hashChecksTotal.WithLabelValues(s.cfg.ID, result).Inc()
		h.mu.Lock()
		if differs {
			h.differs[a.id] = true
		} else {
			delete(h.differs, a.id)
		}
		hashMismatchGauge.WithLabelValues(s.cfg.ID).Set(float64(len(h.differs)))
		h.mu.Unlock()
		if ids := votes[a.hash]; differs && 2*len(ids) > len(members) {
			s.fail(fmt.Errorf("%w: state hash at index %d is %s, but members %v agree on %s",
				ErrStateDiverged, index, mine, ids, a.hash))
		}
	}
}

// fetchHash polls a peer for its hash at index until it has one or ctx
// ends (the peer is behind, or gone: then "").
func fetchHash(ctx context.Context, ac *adminapi.Client, addr string, index uint64) string {
	for {
		var r hashReply
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

// hashCheckLoop proposes OpHashCheck every HashCheckInterval while this
// member is the ready leader.
func (s *Server) hashCheckLoop() {
	if s.cfg.HashCheckInterval <= 0 {
		return
	}
	tick := time.NewTicker(s.cfg.HashCheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		if !s.IsLeader() {
			continue
		}
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.ApplyTimeout)
		if _, err := s.Propose(ctx, &namespace.Command{Op: namespace.OpHashCheck}); err != nil {
			s.log.Warn("proposing a state hash check failed", "err", err)
		}
		cancel()
	}
}
