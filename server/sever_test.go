package server_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server"
	"github.com/latch-io/latch/server/servertest"
)

// TestStalledLeaderSeversRaft stalls the leader's raft log writes in
// process: the member cannot exit (its raft is stuck in the write, as a
// process on a frozen file system is), yet once it fails with
// ErrStorageStalled its raft port must refuse connections at once, so
// the others see it die and elect without waiting out the heartbeat
// timeout.
func TestStalledLeaderSeversRaft(t *testing.T) {
	c := servertest.StartCluster(t, 3, &servertest.Options{Configure: func(i int, cfg *server.Config) {
		cfg.FaultInjection = true
		cfg.StorageStallTimeout = 300 * time.Millisecond
	}})
	leader := c.WaitLeader()
	s := c.Server(leader)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stall := func(on bool) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return c.Admin(servertest.AdminName).Do(ctx, http.MethodPost, s.HTTPAddr(), "/v1/faults/storage", map[string]bool{"stall": on}, nil)
	}
	if err := stall(true); err != nil {
		t.Fatal(err)
	}
	// Let the stuck write go at the end, so the member can close.
	t.Cleanup(func() {
		if err := stall(false); err != nil {
			t.Errorf("releasing the stall: %v", err)
		}
	})
	// A write puts a raft log write in flight; it cannot return.
	go func() { _, _ = s.Propose(ctx, &namespace.Command{Op: namespace.OpNoop}) }()
	select {
	case <-s.Failed():
	case <-ctx.Done():
		t.Fatal("the stalled leader never failed")
	}
	if !errors.Is(s.Err(), server.ErrStorageStalled) {
		t.Fatalf("Err = %v, want ErrStorageStalled", s.Err())
	}
	conn, err := net.DialTimeout("tcp", s.RaftAddr(), time.Second)
	if err == nil {
		conn.Close()
		t.Fatal("the stalled member's raft port still accepts connections")
	}
	// Refused, or reset when the dial raced the listener's close (it sat
	// in the closed listener's backlog): either tells a dead port.
	if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("dial of the stalled member's raft port: %v, want connection refused", err)
	}
	servertest.Eventually(t, "another member leads", func() error {
		for _, i := range c.Running() {
			if i != leader && c.Server(i).IsLeader() {
				return nil
			}
		}
		return errors.New("no other leader yet")
	})
}
