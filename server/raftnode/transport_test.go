package raftnode

import (
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/hashicorp/raft"
)

// TestRaftTransportDoesNotPipeline: the members' raft transport refuses
// pipelined replication, so raft replicates one AppendEntries at a time
// per follower. hashicorp/raft's pipeline can deadlock when its decoder
// stops (a follower answers with a newer term, as after a leadership
// hand-over): the leader then never sends that follower another entry,
// and raft's Shutdown, so Server.Close, waits forever (the hang of
// servertest.Cluster.Stop on a leader, see NetConfig).
func TestRaftTransportDoesNotPipeline(t *testing.T) {
	layer, err := NewTCPLayer("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	trans := raft.NewNetworkTransportWithConfig(NetConfig(layer, NewHCLog(slog.New(slog.NewTextHandler(io.Discard, nil)), "raft-net")))
	defer trans.Close()
	// A peer that listens, so that a transport that pipelines would get
	// its pipeline: the answer must not depend on the peer at all.
	peerLayer, err := NewTCPLayer("127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	peer := raft.NewNetworkTransportWithConfig(NetConfig(peerLayer, NewHCLog(slog.New(slog.NewTextHandler(io.Discard, nil)), "raft-net")))
	defer peer.Close()
	p, err := trans.AppendEntriesPipeline("peer", peer.LocalAddr())
	if p != nil {
		p.Close()
	}
	if !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
		t.Fatalf("AppendEntriesPipeline: %v, want raft.ErrPipelineReplicationNotSupported (pipelined replication can deadlock raft's Shutdown)", err)
	}
}
