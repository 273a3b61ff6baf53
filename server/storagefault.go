package server

import (
	"errors"
	"fmt"
)

// A member never serves what it did not apply. When its namespace store
// meets a storage error (namespace/integrity.go: a failed read or commit,
// a checksum mismatch), its raft log holds an entry that fails its
// checksum (raftstore/checksum.go), or the state hash check finds it
// diverged (raftnode/hashcheck.go), the member fails:
//
//   - one error log line says why and what to do;
//   - every request, /healthz and /readyz fail from then on (running
//     returns ErrMemberFailed), and client connections are closed so
//     clients move to another member at once;
//   - a leader hands leadership to another member, and raft stops, so the
//     member neither votes nor acknowledges entries it could not apply;
//   - Failed is closed, and latchd exits with status 1.
//
// The entries it did not apply stay in its raft log: once an operator has
// replaced the damaged data (e.g. a fresh data dir and --join, or a
// restore), nothing is lost.

// Failed is closed when this member stopped serving because of a storage
// failure or a state divergence; Err says which.
func (s *Server) Failed() <-chan struct{} { return s.failedC }

// Err returns why this member failed, or nil.
func (s *Server) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failErr
}

// watchStorage fails the member when its store reports a fault.
func (s *Server) watchStorage() {
	select {
	case <-s.stop:
	case <-s.store.Failed():
		s.fail(s.store.Err())
	case <-s.raftStore.Failed():
		s.fail(s.raftStore.Err())
	}
}

// fail stops this member from serving for good. It may be called from any
// goroutine, raft's FSM goroutine included: what waits for raft runs on a
// goroutine of its own.
func (s *Server) fail(cause error) {
	s.mu.Lock()
	if s.failErr != nil || s.closed {
		s.mu.Unlock()
		return
	}
	s.failErr = fmt.Errorf("%w: %w", ErrMemberFailed, cause)
	stalled := errors.Is(cause, ErrStorageStalled)
	if stalled && s.sever != nil {
		// raft is stuck in the write: no hand-over can run, and the
		// process may not be able to exit (raftnode/sever.go). Severed before
		// Failed closes: whoever sees the failure sees a dead port.
		s.sever.Sever()
	}
	close(s.failedC)
	s.mu.Unlock()
	registerIntegrityMetrics()
	memberFailedGauge.WithLabelValues(s.cfg.ID).Set(1)
	s.log.Error("this member stops serving: its state cannot be trusted; replace its data dir (start it empty with --join) or restore a snapshot",
		"err", cause, "applied_index", s.store.AppliedIndex())
	s.closeFront()
	s.goFunc(func() {
		if !stalled {
			s.handOver(cause.Error())
		}
		if err := s.raft.Shutdown().Error(); err != nil {
			s.log.Warn("raft shutdown", "err", err)
		}
	})
}
