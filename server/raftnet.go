package server

import (
	"errors"
	"fmt"
	"net"

	"github.com/hashicorp/raft"

	"github.com/latch-io/latch/server/raftnode"
	"github.com/latch-io/latch/session"
)

// The member's raft network, wired from the layers of package raftnode,
// bottom up: plain TCP (or Config.RaftLayer's), the severable layer, the
// fault layer with Config.FaultInjection, and mutual TLS; the crash
// detector dials under all of them and hears of every peer connection
// that ended from the TLS layer.

// raftBottomLayer is the stream layer under everything else: plain TCP,
// or Config.RaftLayer's.
func (s *Server) raftBottomLayer() (raft.StreamLayer, error) {
	cfg := &s.cfg
	if cfg.RaftLayer != nil {
		return cfg.RaftLayer(cfg.RaftAddr)
	}
	var advertise net.Addr
	if cfg.RaftAdvertise != "" {
		var err error
		if advertise, err = net.ResolveTCPAddr("tcp", cfg.RaftAdvertise); err != nil {
			return nil, fmt.Errorf("%w: RaftAdvertise: %v", ErrBadConfig, err)
		}
	}
	l, err := raftnode.NewTCPLayer(cfg.RaftAddr, advertise)
	if err != nil {
		return nil, err
	}
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok || addr.IP == nil || addr.IP.IsUnspecified() {
		l.Close()
		return nil, fmt.Errorf("%w: raft address %v is not advertisable (set RaftAdvertise)", ErrBadConfig, l.Addr())
	}
	return l, nil
}

// newRaftTransport builds raft's NetworkTransport over mutual TLS, with the
// fault layer under it when fault injection is on.
func (s *Server) newRaftTransport(m *session.MemberTLS) error {
	cfg := &s.cfg
	bottom, err := s.raftBottomLayer()
	if err != nil {
		if errors.Is(err, ErrBadConfig) {
			return err
		}
		return fmt.Errorf("latch: raft transport on %s: %w", cfg.RaftAddr, err)
	}
	s.sever = raftnode.NewSeverLayer(bottom)
	inner := raft.StreamLayer(s.sever)
	if cfg.FaultInjection {
		s.faults = raftnode.NewFaultLayer(inner)
		inner = s.faults
	}
	s.crash = raftnode.NewCrashDetector(cfg.ID, s.log, s.stop, bottom.Dial)
	tl := raftnode.NewTLSLayer(inner, m, s.log)
	tl.Refused = func() { s.countRefused("raft") }
	tl.PeerClosed = s.crash.PeerClosed
	s.trans = raft.NewNetworkTransportWithConfig(raftnode.NetConfig(tl, raftnode.NewHCLog(s.log, "raft-net")))
	s.raftAddr = string(s.trans.LocalAddr())
	s.crash.SetTransport(s.trans)
	return nil
}
