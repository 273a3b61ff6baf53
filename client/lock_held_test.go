package client

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/latch-io/latch/server/servertest"
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

// A held lock costs the client no goroutine (the follower watches each
// session that holds locks, not each lock), and a session's end loses
// its own locks only: another session's on the same client stay held.
func TestSessionEndLosesOnlyItsLocks(t *testing.T) {
	tc := startCluster(t, 1, clusterOptions{})
	c := tc.dial(time.Second)
	ctx := testCtx(t)
	ending, err := c.NewSession(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	staying := c.Session()
	kept := NewMutex(staying, "/ends/kept")
	if err := kept.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	const n = 100
	locks := make([]*Mutex, n)
	for i := range locks {
		locks[i] = NewMutex(ending, fmt.Sprintf("/ends/%d", i))
		if err := locks[i].Lock(ctx); err != nil {
			t.Fatalf("lock %d: %v", i, err)
		}
	}
	servertest.Eventually(t, "goroutines to settle", func() error {
		if grew := runtime.NumGoroutine() - before; grew >= n/2 {
			return fmt.Errorf("%d more goroutines while %d more locks are held", grew, n)
		}
		return nil
	})
	ending.Orphan()
	for i, m := range locks {
		select {
		case <-m.Lost():
			if !errors.Is(m.Err(), ErrLockLost) || !errors.Is(m.Err(), ErrSessionClosed) {
				t.Fatalf("lock %d lost with %v", i, m.Err())
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("lock %d not lost when its session ended", i)
		}
	}
	select {
	case <-kept.Lost():
		t.Fatalf("another session's end lost this session's lock: %v", kept.Err())
	default:
	}
	if err := kept.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// A lock taken after the session's end is lost at once.
	late := NewMutex(staying, "/ends/late")
	if err := late.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	staying.Orphan()
	select {
	case <-late.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("a lock of a session that ended later was not lost")
	}
}
