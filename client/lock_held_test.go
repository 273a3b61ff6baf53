package client

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// A held lock occupied one of its connection's request slots: a client
// asking for 4,200 locks got 4,096, then every call got ErrBusy, its
// keepalives starved and its session expired with all its locks. Here the
// slots are 16 and one session holds 200 locks: other calls and the
// keepalives go on, and a held lock's end still reaches Lost().
func TestHeldLocksTakeNoRequestSlot(t *testing.T) {
	tc := startCluster(t, 1, clusterOptions{maxRequests: 16})
	c := tc.dial(time.Second)
	ctx := testCtx(t)
	s := c.Session()
	const n = 200
	locks := make([]*Mutex, n)
	for i := range locks {
		locks[i] = NewMutex(s, fmt.Sprintf("/held/%d", i))
		if err := locks[i].Lock(ctx); err != nil {
			t.Fatalf("lock %d: %v", i, err)
		}
	}
	short := NewMutex(s, "/short", WithHoldTTL(300*time.Millisecond))
	if err := short.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	// Three TTLs: the session lives only if its keepalives get through.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if _, _, err := c.Get(ctx, "/held/0"); err != nil {
			t.Fatalf("get while %d locks are held: %v", n, err)
		}
		time.Sleep(50 * time.Millisecond) // paces the reads; the test waits for time itself
	}
	select {
	case <-s.Done():
		t.Fatalf("session ended: %v", s.Err())
	default:
	}
	for i, m := range locks {
		select {
		case <-m.Lost():
			t.Fatalf("lock %d lost: %v", i, m.Err())
		default:
		}
	}
	select {
	case <-short.Lost():
		if !errors.Is(short.Err(), ErrLockLost) || !errors.Is(short.Err(), ErrNotHeld) {
			t.Fatalf("hold TTL loss reported as %v", short.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a lock whose hold TTL passed was not reported lost")
	}
	for i, m := range locks {
		if err := m.Unlock(ctx); err != nil {
			t.Fatalf("unlock %d: %v", i, err)
		}
		select {
		case <-m.Lost():
			t.Fatalf("unlock %d closed Lost: %v", i, m.Err())
		default:
		}
	}
}
