package client

import (
	"testing"
	"time"
)

// Against members that do not offer the mux stream (built before it),
// the client sends every request on a stream of its own: sessions,
// writes, reads and locks all work.
func TestMembersWithoutMux(t *testing.T) {
	tc := startCluster(t, 3, clusterOptions{noMux: true})
	c := tc.dial(5 * time.Second)
	ctx := testCtx(t)
	if _, err := c.Create(ctx, "/a", []byte("v0")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set(ctx, "/a", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if data, _, err := c.Get(ctx, "/a"); err != nil || string(data) != "v1" {
		t.Fatalf("get /a: %q, %v", data, err)
	}
	s, err := c.NewSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMutex(s, "/lock")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
