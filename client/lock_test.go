package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/latch-io/latch/server/servertest"
)

func TestMutexBasic(t *testing.T) {
	tc := startLockCluster(t, 3)
	c1, c2 := tc.dial(2*time.Second), tc.dial(2*time.Second)
	ctx := testCtx(t)

	m1 := NewMutex(c1.Session(), "/jobs/nightly")
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	tok1 := m1.Token()
	if tok1 == 0 || m1.Node() == "" {
		t.Fatalf("token %d node %q after Lock", tok1, m1.Node())
	}
	ok, err := c2.CheckSequencer(ctx, m1.Sequencer())
	if err != nil || !ok {
		t.Fatalf("CheckSequencer of the holder = %v, %v", ok, err)
	}

	m2 := NewMutex(c2.Session(), "/jobs/nightly")
	got := make(chan error, 1)
	go func() { got <- m2.Lock(ctx) }()
	// m2 queues behind m1: its request node appears, not granted.
	servertest.Eventually(t, "second request queued", func() error {
		q, err := c2.LockQueue(ctx, "/jobs/nightly")
		if err != nil {
			return err
		}
		if len(q) != 2 || !q[0].Granted || q[1].Granted {
			return errors.New("queue not [held, waiting] yet")
		}
		return nil
	})
	select {
	case err := <-got:
		t.Fatalf("second Lock returned %v while the first holds", err)
	default:
	}
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if m2.Token() <= tok1 {
		t.Fatalf("second token %d not above first %d", m2.Token(), tok1)
	}
	if ok, _ := c2.CheckSequencer(ctx, m1.Sequencer()); ok {
		t.Fatal("the released holder's sequencer still checks")
	}
	select {
	case <-m1.Lost():
		t.Fatalf("Unlock closed Lost (%v)", m1.Err())
	default:
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m2.Unlock(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("second Unlock = %v, want ErrNotHeld", err)
	}
}

func TestMutexTryLockAndTimeout(t *testing.T) {
	tc := startLockCluster(t, 1)
	c1, c2 := tc.dial(2*time.Second), tc.dial(2*time.Second)
	ctx := testCtx(t)
	m1 := NewMutex(c1.Session(), "/t")
	if err := m1.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	m2 := NewMutex(c2.Session(), "/t")
	if err := m2.TryLock(ctx); !errors.Is(err, ErrLocked) {
		t.Fatalf("TryLock of a held lock = %v, want ErrLocked", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := m2.Lock(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock past its deadline = %v", err)
	}
	// Both failed waits left nothing in the queue.
	servertest.Eventually(t, "queue holds only the holder", func() error {
		names, err := c2.Children(ctx, "/t")
		if err != nil {
			return err
		}
		if len(names) != 1 {
			return errors.New("children: " + names[0])
		}
		return nil
	})
}
