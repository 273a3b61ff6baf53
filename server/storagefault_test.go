package server_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server"
	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/server/servertest"
)

// TestStorageFaultStopsTheLeader damages a value under the running
// leader's store; the next command that reads it is not applied there:
// the leader fails (Failed, Err), fails /healthz and /readyz, refuses
// requests with an error clients treat as "go elsewhere", and another
// member takes over with the write applied.
func TestStorageFaultStopsTheLeader(t *testing.T) {
	dirs := make([]string, 3)
	c := servertest.StartCluster(t, 3, &servertest.Options{Configure: func(i int, cfg *server.Config) {
		dirs[i] = cfg.DataDir
	}})
	leader := c.WaitLeader()
	ctx := context.Background()
	big := bytes.Repeat([]byte("leader-value-log-data."), 400)
	if r := c.Propose(ctx, &namespace.Command{Op: namespace.OpCreate, Path: "/big", Data: big}); r.Err != nil {
		t.Fatal(r.Err)
	}
	s := c.Server(leader)
	proc.FlipByte(t, filepath.Join(dirs[leader], "fsm"), ".vlog", big[:44])
	applied := s.Store().AppliedIndex()

	set := &namespace.Command{Op: namespace.OpSet, Path: "/big", Data: []byte("new"), Version: namespace.AnyVersion}
	_, err := s.Propose(ctx, set)
	switch {
	case errors.Is(err, server.ErrUnknownOutcome):
		// Committed through the others, not applied here.
	case errors.Is(err, server.ErrNotLeader):
		// Leadership moved before the write (a loaded machine): the
		// damaged member applies it as a follower.
		if r := c.Propose(ctx, set); r.Err != nil {
			t.Fatal(r.Err)
		}
	default:
		t.Fatalf("Propose on the damaged leader: %v, want ErrUnknownOutcome (committed, not applied here)", err)
	}
	<-s.Failed()
	if !errors.Is(s.Err(), server.ErrMemberFailed) || !errors.Is(s.Err(), namespace.ErrStorage) {
		t.Fatalf("Err = %v", s.Err())
	}
	// Other entries (ticks, settings) may be applied after applied was
	// read and before the set; what must hold is that the set's own index,
	// learnt below from the member that applied it, never is.
	failedApplied := s.Store().AppliedIndex()
	if failedApplied < applied {
		t.Fatalf("the failed store's applied index went back: %d, was %d", failedApplied, applied)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := adminHTTP(c, "").Get("https://" + s.HTTPAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s on the failed member: %d, want 503", path, resp.StatusCode)
		}
	}
	if _, err := s.Propose(ctx, &namespace.Command{Op: namespace.OpNoop}); !errors.Is(err, namespace.ErrClosed) {
		t.Fatalf("Propose after the failure: %v, want an ErrClosed (go elsewhere)", err)
	}
	// The failed member stepped down and stopped taking part; another
	// member leads, with the write applied.
	next := -1
	servertest.Eventually(t, "another member leads", func() error {
		for _, i := range c.Running() {
			if i != leader && c.Server(i).IsLeader() {
				next = i
				return nil
			}
		}
		return errors.New("no other ready leader")
	})
	c.Stop(leader)
	data, st, err := c.Server(next).Store().Get("/big")
	if err != nil || string(data) != "new" {
		t.Fatalf("new leader: %q %v", data, err)
	}
	if failedApplied >= st.ModRev {
		t.Fatalf("the failed store recorded index %d as applied; the set it failed is index %d", failedApplied, st.ModRev)
	}
}
