package client

import (
	"testing"
	"time"

	"github.com/latch-io/latch/session"
)

// Against members that do not offer the mux stream (built before it, and
// before MsgLockCall), the client sends every request on a stream of its
// own: sessions, writes, reads and locks (MsgLock) all work.
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

// When the member ends the client's mux stream (here: another mux stream
// of the connection replaces it), calls go on: reads retry on a new mux
// stream of the same connection.
func TestMuxStreamEndedByMember(t *testing.T) {
	tc := startCluster(t, 1, clusterOptions{})
	c := tc.dial(5 * time.Second)
	ctx := testCtx(t)
	if _, err := c.Create(ctx, "/a", []byte("v0")); err != nil {
		t.Fatal(err)
	}
	l, err := c.waitLink(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		for range 200 {
			if _, _, err := c.Get(ctx, "/a"); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for range 3 {
		str, err := l.conn.OpenStreamSync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		frame, err := session.EncodeRequest(&session.Request{Type: session.MsgMux})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := str.Write(frame); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-errc; err != nil {
		t.Fatalf("get while the member ended the mux stream: %v", err)
	}
	if data, _, err := c.Get(ctx, "/a"); err != nil || string(data) != "v0" {
		t.Fatalf("get after: %q, %v", data, err)
	}
	c.mu.Lock()
	same := c.cur == l
	c.mu.Unlock()
	if !same {
		t.Fatal("the client reconnected; ending the mux stream must not cost the connection")
	}
}
