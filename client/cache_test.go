package client

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/latch-io/latch/server/servertest"
	"github.com/latch-io/latch/session"
)

// waitCacheHit reads path Cached until the answer comes from the cache
// (the lease is granted in the background after the first fill).
func waitCacheHit(t *testing.T, c *Client, path string) []byte {
	t.Helper()
	var data []byte
	servertest.Eventually(t, "a cached read of "+path+" answered from the cache", func() error {
		before := c.CacheStats().Hits
		d, _, err := c.Get(testCtx(t), path, Cached())
		if err != nil {
			return err
		}
		data = d
		if c.CacheStats().Hits == before {
			return errors.New("answered by the leader")
		}
		return nil
	})
	return data
}

// TestCachedReadInvalidatedBeforeWriteReturns: once another client's Set
// returned, a Cached read never answers the old value; a node cached
// absent becomes present the same way.
func TestCachedReadInvalidatedBeforeWriteReturns(t *testing.T) {
	tc := startCluster(t, 3, clusterOptions{})
	a, b := tc.dial(5*time.Second), tc.dial(5*time.Second)
	ctx := testCtx(t)
	if _, err := b.Create(ctx, "/k", []byte("v0")); err != nil {
		t.Fatal(err)
	}
	if got := waitCacheHit(t, a, "/k"); string(got) != "v0" {
		t.Fatalf("cached %q, want v0", got)
	}
	for i := 1; i <= 20; i++ {
		want := fmt.Sprintf("v%d", i)
		if _, err := b.Set(ctx, "/k", []byte(want)); err != nil {
			t.Fatal(err)
		}
		got, _, err := a.Get(ctx, "/k", Cached())
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Fatalf("after Set(%s) returned, a cached read answered %q", want, got)
		}
	}
	if st := a.CacheStats(); st.Invalidations == 0 || st.Nodes > 1 {
		t.Fatalf("cache stats %+v: want invalidations and at most one node", st)
	}

	// Absence is cached and invalidated too.
	if ok, _, err := a.Exists(ctx, "/new", Cached()); err != nil || ok {
		t.Fatalf("Exists(/new) = %v, %v", ok, err)
	}
	waitCacheHit(t, a, "/k")
	if _, err := b.Create(ctx, "/new", nil); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := a.Exists(ctx, "/new", Cached()); err != nil || !ok {
		t.Fatalf("after Create returned, cached Exists(/new) = %v, %v", ok, err)
	}
}

// TestStaleReadsFromFollower: Stale reads go to a member that is not the
// leader, and see the client's own writes at once (MinRev).
func TestStaleReadsFromFollower(t *testing.T) {
	tc := startCluster(t, 3, clusterOptions{})
	c := tc.dial(5 * time.Second)
	ctx := testCtx(t)
	if _, err := c.Create(ctx, "/s", []byte("0")); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, "a read member", func() error {
		if _, _, err := c.Get(ctx, "/s", Stale()); err != nil {
			return err
		}
		if m := c.ReadMember(); m == "" || m == c.Member() {
			return fmt.Errorf("read member %q, leader %q", m, c.Member())
		}
		return nil
	})
	for i := 1; i <= 50; i++ {
		want := fmt.Sprint(i)
		if _, err := c.Set(ctx, "/s", []byte(want)); err != nil {
			t.Fatal(err)
		}
		got, _, err := c.Get(ctx, "/s", Stale())
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Fatalf("a Stale read after the client's own Set(%s) answered %q", want, got)
		}
	}
}

// TestCacheLeaseBoundsWrites: a cache that never acknowledges its
// invalidations holds a write back only until its lease ends; then the
// leader drops its stream (the client must drop its cache).
func TestCacheLeaseBoundsWrites(t *testing.T) {
	tc := startCluster(t, 3, clusterOptions{})
	writer := tc.dial(5 * time.Second)
	ctx := testCtx(t)
	if _, err := writer.Create(ctx, "/held", []byte("v0")); err != nil {
		t.Fatal(err)
	}
	conn, err := session.Dial(ctx, tc.endpoint(tc.WaitLeader()), tc.tls, session.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseWithError(session.ConnClosed, "")
	if _, err := session.Hello(ctx, conn, "silent-cache"); err != nil {
		t.Fatal(err)
	}
	d, err := session.OpenDuplex(ctx, conn, &session.Request{Type: session.MsgCache})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if first, err := d.Next(); err != nil || first.TTLMillis <= 0 {
		t.Fatalf("cache stream acknowledgement: %+v, %v", first, err)
	}
	if err := d.Send(&session.Request{Type: session.MsgCacheRenew}); err != nil {
		t.Fatal(err)
	}
	if grant, err := d.Next(); err != nil || grant.TTLMillis <= 0 {
		t.Fatalf("lease grant: %+v, %v", grant, err)
	}
	resp, err := session.RoundTrip(ctx, conn, &session.Request{Type: session.MsgGet, Path: "/held", Cache: true})
	if err != nil || resp.Err() != nil || !resp.Cached {
		t.Fatalf("cache fill: %+v, %v", resp, err)
	}
	// This client never acks: the write completes once the lease ran out.
	if _, err := writer.Set(ctx, "/held", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	inval, err := d.Next()
	if err != nil || len(inval.Names) != 1 || inval.Names[0] != "/held" {
		t.Fatalf("invalidation: %+v, %v", inval, err)
	}
	if _, err := d.Next(); !errors.Is(err, ErrTimeout) {
		t.Fatalf("after its lease ran out unacknowledged the stream ends with ErrTimeout, got %v", err)
	}
}
