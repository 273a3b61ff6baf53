package client

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/latch-io/latch/server/servertest"
)

func TestCloseVersusOrphan(t *testing.T) {
	tc := startCluster(t, 3, clusterOptions{})
	c := tc.dial(5 * time.Second)
	ctx := testCtx(t)
	const ttl = time.Second

	closed, err := c.NewSession(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := c.NewSession(ctx, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := closed.Create(ctx, "/closed", nil, Ephemeral()); err != nil {
		t.Fatal(err)
	}
	if _, err := orphan.Create(ctx, "/orphan", nil, Ephemeral()); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(ctx, "/orphan")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	// The lease end moves forward with every acknowledged keepalive.
	if end := closed.LeaseEnd(); !end.After(time.Now()) || end.After(time.Now().Add(ttl)) {
		t.Fatalf("lease end %v is not within a TTL from now", end)
	}
	first := closed.LeaseEnd()
	servertest.Eventually(t, "a keepalive extends the lease", func() error {
		if !closed.LeaseEnd().After(first) {
			return errors.New("lease end unchanged")
		}
		return nil
	})
	if closed.TTL() != ttl {
		t.Fatalf("TTL %v, want %v", closed.TTL(), ttl)
	}

	// Close: the ephemeral is gone as soon as Close returns.
	if err := closed.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := c.Exists(ctx, "/closed"); ok {
		t.Fatal("ephemeral of a closed session still exists")
	}
	wait(t, "closed session done", closed.Done())
	if !errors.Is(closed.Err(), ErrSessionClosed) {
		t.Fatalf("closed session Err = %v", closed.Err())
	}
	var states []State
	for st := range closed.State() {
		states = append(states, st)
	}
	if len(states) == 0 || states[len(states)-1] != StateExpired {
		t.Fatalf("state channel of a closed session: %v, want it to end with expired and close", states)
	}
	if _, err := closed.Create(ctx, "/again", nil, Ephemeral()); !errors.Is(err, ErrSessionClosed) {
		t.Fatalf("create on a closed session: %v", err)
	}

	// Orphan: the ephemeral stays until the server expires the session.
	orphaned := time.Now()
	orphan.Orphan()
	wait(t, "orphaned session done", orphan.Done())
	if ok, _, _ := c.Exists(ctx, "/orphan"); !ok {
		t.Fatal("ephemeral of an orphaned session vanished at once")
	}
	if ev := nextEvent(t, w); ev.Type != EventDeleted {
		t.Fatalf("event %+v, want deleted", ev)
	}
	if d := time.Since(orphaned); d < ttl-ttl/3 {
		t.Fatalf("orphaned session expired after %v, before its TTL %v could run out", d, ttl)
	}
	list, err := c.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.ID == orphan.ID() || s.ID == closed.ID() {
			t.Fatalf("session %d still listed", s.ID)
		}
	}
	// The default session was never touched.
	if err := c.Session().Err(); err != nil {
		t.Fatal(err)
	}
}

// TestSessionsSurviveLeaderStop holds many sessions with ephemerals on one
// client, stops the leader, and checks that the client moved every session
// to the new leader: nothing expired, no ephemeral vanished, and requests
// issued during the failover completed.
func TestSessionsSurviveLeaderStop(t *testing.T) {
	tc := startCluster(t, 3, clusterOptions{})
	const ttl = 2 * time.Second
	c := tc.dial(ttl)
	ctx := testCtx(t)
	if _, err := c.Create(ctx, "/eph", nil); err != nil {
		t.Fatal(err)
	}

	const n = 1000
	sessions := make([]*Session, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 64)
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			s, err := c.NewSession(ctx, ttl)
			if err != nil {
				errs <- err
				return
			}
			sessions[i] = s
			if _, err := s.Create(ctx, fmt.Sprintf("/eph/%04d", i), nil, Ephemeral()); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	old := tc.WaitLeader()
	// Requests issued while the leader goes away wait and complete: a
	// read always; a write in flight on the dying connection may report
	// ErrUnknownOutcome (it may have been applied); one issued after the
	// connection dropped completes.
	readDuring := make(chan error, 1)
	writeDuring := make(chan error, 1)
	go func() {
		_, _, err := c.Get(ctx, "/eph")
		readDuring <- err
	}()
	go func() {
		_, err := c.Create(ctx, "/during", nil)
		writeDuring <- err
	}()
	tc.Stop(old)
	afterStop := make(chan error, 1)
	go func() {
		_, err := c.Create(ctx, "/after-stop", nil)
		afterStop <- err
	}()
	tc.WaitLeader()
	if err := wait(t, "read during failover", readDuring); err != nil {
		t.Fatalf("read during failover: %v", err)
	}
	if err := wait(t, "write during failover", writeDuring); err != nil && !errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("write during failover: %v", err)
	}
	if err := wait(t, "write after stop", afterStop); err != nil && !errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("write issued after the leader stopped: %v", err)
	}
	if _, err := c.Create(ctx, "/after-election", nil); err != nil {
		t.Fatalf("write issued once a new leader was elected: %v", err)
	}
	if err := c.Sync(ctx); err != nil {
		t.Fatalf("sync after failover: %v", err)
	}
	st, _, err := c.Status(ctx)
	if err != nil || st.ID != tc.Server(tc.WaitLeader()).ID() {
		t.Fatalf("status after failover: %+v %v", st, err)
	}

	// Watch the sessions for longer than a TTL after the new leader took
	// over: a session the client failed to carry over would expire there.
	window := time.NewTimer(ttl + ttl/2)
	defer window.Stop()
	anyDone := make(chan int, n)
	stop := make(chan struct{})
	var watchers sync.WaitGroup
	for i, s := range sessions {
		watchers.Go(func() {
			select {
			case <-s.Done():
				anyDone <- i
			case <-stop:
			}
		})
	}
	select {
	case i := <-anyDone:
		close(stop)
		watchers.Wait()
		t.Fatalf("session %d (%d) expired: %v", i, sessions[i].ID(), sessions[i].Err())
	case <-window.C:
		close(stop)
		watchers.Wait()
	}

	names, err := c.Children(ctx, "/eph")
	if err != nil || len(names) != n {
		t.Fatalf("%d ephemerals after the failover, want %d (%v)", len(names), n, err)
	}
	list, err := c.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	live := map[uint64]bool{}
	for _, s := range list {
		live[s.ID] = true
	}
	for _, s := range sessions {
		if !live[s.ID()] {
			t.Fatalf("session %d is gone on the server", s.ID())
		}
	}
}

// TestClientClose: closing the client closes its sessions (their
// ephemerals vanish at once), ends its watches with ErrClosed, and fails
// later calls with ErrClosed.
func TestClientClose(t *testing.T) {
	tc := startCluster(t, 3, clusterOptions{})
	observer := tc.dial(5 * time.Second)
	c := tc.dial(5 * time.Second)
	ctx := testCtx(t)
	if _, err := c.Create(ctx, "/mine", nil, Ephemeral()); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(ctx, "/mine")
	if err != nil {
		t.Fatal(err)
	}
	s := c.Session()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := observer.Exists(ctx, "/mine"); ok || err != nil {
		t.Fatalf("ephemeral of a closed client: exists=%v err=%v", ok, err)
	}
	wait(t, "watch of a closed client ends", w.Done())
	if !errors.Is(w.Err(), ErrClosed) {
		t.Fatalf("watch of a closed client: %v", w.Err())
	}
	wait(t, "session of a closed client ends", s.Done())
	if _, _, err := c.Get(ctx, "/"); !errors.Is(err, ErrClosed) {
		t.Fatalf("get on a closed client: %v", err)
	}
	if _, err := c.NewSession(ctx, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("new session on a closed client: %v", err)
	}
}
