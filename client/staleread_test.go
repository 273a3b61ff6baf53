package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latch-io/latch/server/servertest"
	"github.com/latch-io/latch/session"
)

// Stale reads are monotonic for a client: across reads served by
// different members (the read member is stopped under the client, twice),
// mixed with linearizable reads, no read returns state older than one the
// client already saw.

// staleRead is one read of the counter in the order the client made them.
type staleRead struct {
	value  int64  // the counter read
	modRev uint64 // the revision that wrote it
	stale  bool
	member string // the read member at the time ("" : the leader)
}

// checkMonotonic fails at the first read that went back in time: a lower
// revision or counter than an earlier read of the same client.
func checkMonotonic(reads []staleRead) error {
	for i := 1; i < len(reads); i++ {
		prev, cur := reads[i-1], reads[i]
		if cur.modRev < prev.modRev || cur.value < prev.value {
			return fmt.Errorf("read %d (stale=%v, member %q) returned %d at revision %d after read %d (stale=%v, member %q) returned %d at revision %d",
				i, cur.stale, cur.member, cur.value, cur.modRev, i-1, prev.stale, prev.member, prev.value, prev.modRev)
		}
	}
	return nil
}

func TestMonotonicCheckerCatchesRegression(t *testing.T) {
	good := []staleRead{{value: 1, modRev: 10, stale: true}, {value: 1, modRev: 10}, {value: 3, modRev: 14, stale: true}}
	if err := checkMonotonic(good); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]staleRead{
		"revision": {{value: 3, modRev: 14}, {value: 3, modRev: 12, stale: true}},
		"value":    {{value: 3, modRev: 14}, {value: 2, modRev: 14, stale: true}},
	} {
		if err := checkMonotonic(bad); err == nil {
			t.Errorf("%s: a regressing history passed", name)
		}
	}
}

func TestStaleReadsMonotonicAcrossMembers(t *testing.T) {
	tc := startCluster(t, 3, clusterOptions{})
	writer, reader := tc.dial(5*time.Second), tc.dial(5*time.Second)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	if _, err := writer.Create(ctx, "/mono", []byte("0")); err != nil {
		t.Fatal(err)
	}
	var (
		wg      sync.WaitGroup
		stop    atomic.Bool
		werr    error
		mu      sync.Mutex
		reads   []staleRead
		members = map[string]bool{}
	)
	defer func() {
		stop.Store(true)
		cancel()
		wg.Wait()
	}()
	wg.Go(func() {
		for i := 1; !stop.Load() && ctx.Err() == nil; i++ {
			if _, err := writer.Set(ctx, "/mono", []byte(strconv.Itoa(i))); err != nil && !errors.Is(err, ErrUnknownOutcome) {
				werr = err
				return
			}
		}
	})
	read := func(n int) {
		t.Helper()
		for i := range n {
			var opts []ReadOption
			stale := i%8 != 0
			if stale {
				opts = append(opts, Stale())
			}
			data, st, err := reader.Get(ctx, "/mono", opts...)
			if err != nil {
				t.Fatal(err)
			}
			v, err := strconv.ParseInt(string(data), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			m := reader.ReadMember()
			mu.Lock()
			reads = append(reads, staleRead{value: v, modRev: st.ModRev, stale: stale, member: m})
			if m != "" && stale {
				members[m] = true
			}
			mu.Unlock()
		}
	}
	// byID returns the index of the running member with id.
	byID := func(id string) int {
		for _, i := range tc.Running() {
			if tc.Server(i).ID() == id {
				return i
			}
		}
		return -1
	}
	read(100)
	for range 2 {
		var rm string
		servertest.Eventually(t, "a read member that is not the leader", func() error {
			read(8)
			rm = reader.ReadMember()
			if rm == "" || rm == reader.Member() || byID(rm) < 0 {
				return fmt.Errorf("read member %q, leader %q", rm, reader.Member())
			}
			return nil
		})
		i := byID(rm)
		tc.Stop(i) // the member the client reads from goes away under it
		read(100)
		tc.Restart(i)
		read(100)
	}
	stop.Store(true)
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	if err := checkMonotonic(reads); err != nil {
		t.Fatal(err)
	}
	if len(members) < 2 {
		t.Fatalf("stale reads were served by %v: the test did not move the client between members", members)
	}
	t.Logf("%d reads, stale ones served by %v", len(reads), members)
}

// TestStaleReadBehind: a member that has not applied the revision a client
// saw answers ErrBehind rather than older state.
func TestStaleReadBehind(t *testing.T) {
	tc := startCluster(t, 3, clusterOptions{})
	c := tc.dial(5 * time.Second)
	ctx := testCtx(t)
	if _, err := c.Create(ctx, "/b", nil); err != nil {
		t.Fatal(err)
	}
	for _, i := range tc.Running() {
		conn, err := session.Dial(ctx, tc.endpoint(i), tc.tls, session.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.CloseWithError(session.ConnClosed, "")
		if _, err := session.Hello(ctx, conn, "test"); err != nil {
			t.Fatal(err)
		}
		resp, err := session.RoundTrip(ctx, conn, &session.Request{Type: session.MsgGet, Path: "/b", Stale: true, MinRev: c.Revision() + 1_000_000})
		if err != nil {
			t.Fatal(err)
		}
		if err := resp.Err(); !errors.Is(err, ErrBehind) {
			t.Fatalf("n%d: Stale Get at a revision nobody has: %v, want ErrBehind", i+1, err)
		}
		resp, err = session.RoundTrip(ctx, conn, &session.Request{Type: session.MsgGet, Path: "/b", Stale: true, MinRev: c.Revision()})
		if err != nil || resp.Err() != nil || resp.Rev < c.Revision() {
			t.Fatalf("n%d: Stale Get at the client's revision %d: rev %d, %v, %v", i+1, c.Revision(), resp.Rev, err, resp.Err())
		}
	}
}
