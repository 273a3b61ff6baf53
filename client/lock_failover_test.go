package client

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/servertest"
	"github.com/latch-io/latch/session"
)

// TestLockFailover stops the leader while one client holds a lock and
// another waits for it: the holder keeps it (its session lives on the new
// leader), the waiter keeps its place (it re-attaches to its request, no
// second request appears), and both streams still report what happens
// afterwards.
func TestLockFailover(t *testing.T) {
	tc := startLockCluster(t, 3)
	holder, waiter := tc.dial(3*time.Second), tc.dial(3*time.Second)
	ctx := testCtx(t)

	m1 := NewMutex(holder.Session(), "/f")
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	m2 := NewMutex(waiter.Session(), "/f")
	wl := lockAsync(ctx, m2.Lock)
	before := waitQueue(t, waiter, "/f", "waiter queued", queueShape(true, false))

	leader := tc.WaitLeader()
	tc.Stop(leader)
	tc.WaitLeader()

	// The same two requests, in the same order, on the new leader.
	after := waitQueue(t, waiter, "/f", "queue after failover", queueShape(true, false))
	for i := range before {
		if after[i].Node != before[i].Node {
			t.Fatalf("queue changed over the failover: %+v -> %+v", before, after)
		}
	}
	notDone(t, wl, "waiter")
	if ok, err := waiter.CheckSequencer(ctx, m1.Sequencer()); err != nil || !ok {
		t.Fatalf("holder's sequencer after failover: %v %v", ok, err)
	}
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	done(t, wl, "waiter after the holder unlocked")
	select {
	case <-m1.Lost():
		t.Fatalf("the holder's lock was reported lost over the failover: %v", m1.Err())
	default:
	}
	if m2.Node() != before[1].Node || m2.Token() <= before[0].Token {
		t.Fatalf("waiter holds %s token %d; want %s above %d", m2.Node(), m2.Token(), before[1].Node, before[0].Token)
	}

	// The waiter's hold is watched on the new leader: deleting its node
	// (as its own session: nobody else may) is reported at once.
	res := tc.Propose(ctx, &namespace.Command{
		Op: namespace.OpDelete, Path: m2.Node(), Version: namespace.AnyVersion, Session: waiter.Session().ID(),
	})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	select {
	case <-m2.Lost():
	case <-time.After(servertest.WaitTimeout):
		t.Fatal("Lost not closed after the node was deleted")
	}
	if !errors.Is(m2.Err(), ErrLockLost) {
		t.Fatalf("Err = %v", m2.Err())
	}
	if err := m2.Unlock(ctx); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Unlock of a lost lock = %v, want ErrLockLost", err)
	}
	if err := holder.Session().Err(); err != nil {
		t.Fatalf("holder's session: %v", err)
	}
	waitQueue(t, waiter, "/f", "queue empty", func(q []LockInfo) error {
		if len(q) != 0 {
			return fmt.Errorf("queue %+v", q)
		}
		return nil
	})
}

// TestLockRetryFindsItsRequest: a Lock whose request was applied without
// its answer reaching the client (the connection broke first) sends it
// again with the same request id and gets the request the cluster already
// has, in its place, instead of queueing a second one (ErrWouldDeadlock
// for an exclusive lock). The client guesses nothing.
func TestLockRetryFindsItsRequest(t *testing.T) {
	tc := startLockCluster(t, 1)
	c := tc.dial(3 * time.Second)
	ctx := testCtx(t)
	res := tc.Propose(ctx, &namespace.Command{Op: namespace.OpLockRequest, Path: "/retry", Session: c.Session().ID(), RequestID: "lost-answer"})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	h := newLockHandle(c.Session(), "/retry", LockExclusive, lockOptions{})
	a := &acquisition{h: h, reqID: "lost-answer"}
	hd, err := a.run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if hd.node != res.Path || hd.token != res.Index || hd.rev != res.Index {
		t.Fatalf("held %s token %d rev %d, want the earlier request %s token %d", hd.node, hd.token, hd.rev, res.Path, res.Index)
	}
	waitQueue(t, c, "/retry", "one request", queueShape(true))
	h.mu.Lock()
	h.cur, h.last = hd, hd
	h.mu.Unlock()
	if err := h.release(ctx); err != nil {
		t.Fatal(err)
	}
	waitQueue(t, c, "/retry", "released", queueShape())

	// A Lock that gives up before learning its node withdraws the request
	// by its id.
	res = tc.Propose(ctx, &namespace.Command{Op: namespace.OpLockRequest, Path: "/retry", Session: c.Session().ID(), RequestID: "abandoned"})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	(&acquisition{h: h, reqID: "abandoned", attempts: 1}).abandon()
	waitQueue(t, c, "/retry", "withdrawn by request id", queueShape())
}

// TestLockGrantUnreadIsWithdrawn pins the window of a grant racing a
// waiter's end: the server wrote the grant and ended the stream, the
// client reset the stream without reading it (its ctx ended), on a live
// connection. The reset reaches a stream that is over, so the server
// withdraws nothing; the Lock that gave up must withdraw the request
// itself, or the lock stays held by nobody for the session's life.
func TestLockGrantUnreadIsWithdrawn(t *testing.T) {
	tc := startLockCluster(t, 1)
	c1, c2 := tc.dial(3*time.Second), tc.dial(3*time.Second)
	ctx := testCtx(t)
	m1 := NewMutex(c1.Session(), "/unread")
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	h := newLockHandle(c2.Session(), "/unread", LockExclusive, lockOptions{})
	a := &acquisition{h: h, reqID: newRequestID()}
	req := session.Request{Type: session.MsgLock, Path: "/unread", Mode: LockExclusive, RequestID: a.reqID}
	l, err := c2.ready4(ctx, h.s, &req)
	if err != nil {
		t.Fatal(err)
	}
	sr, err := session.OpenStreaming(ctx, l.conn, &req)
	if err != nil {
		t.Fatal(err)
	}
	a.attempts++
	q, err := sr.Next()
	if err != nil || q.Lock != session.LockQueued {
		t.Fatalf("queued: %+v %v", q, err)
	}
	a.node = q.Node
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	waitQueue(t, c2, "/unread", "the waiter granted", queueShape(true))
	sr.Close() // the grant is never read: the caller gave up
	if l.conn.Context().Err() != nil {
		t.Fatal("the connection broke: this test is about a live one")
	}
	a.abandon()
	waitQueue(t, c1, "/unread", "the unread grant released", queueShape())
}
