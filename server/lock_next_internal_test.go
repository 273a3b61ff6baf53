package server

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/latch-io/latch/session"
)

// A waiter learns it is next in line in its first frame, or later from a
// LockQueued frame with Next when the request ahead of it is granted:
// the client watches the leader closely only then (FeatureLockNext), so
// a member that told nobody, or told the wrong waiter, would leave the
// next grant's client unwatched or make every waiter ping.
func TestLockNextInLine(t *testing.T) {
	s := startDev(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, b, c := dialLock(t, ctx, s, nil), dialLock(t, ctx, s, nil), dialLock(t, ctx, s, nil)
	if s.front.quic.Features()&session.FeatureLockNext == 0 {
		t.Fatal("the member does not announce FeatureLockNext")
	}

	held, g, err := a.lock(ctx, session.Request{Path: "/n"})
	if err != nil || g.Lock != session.LockGranted || g.Next {
		t.Fatalf("first lock: %+v %v", g, err)
	}
	held.Close()
	bs, bq, err := b.lock(ctx, session.Request{Path: "/n"})
	if err != nil || bq.Lock != session.LockQueued || !bq.Next {
		t.Fatalf("first waiter: %+v %v, want queued and next", bq, err)
	}
	cs, cq, err := c.lock(ctx, session.Request{Path: "/n"})
	if err != nil || cq.Lock != session.LockQueued || cq.Next {
		t.Fatalf("second waiter: %+v %v, want queued, not next", cq, err)
	}

	// a's release grants b; c moves up and is told, on its stream.
	a.rt(ctx, &session.Request{Type: session.MsgLockRelease, Node: g.Node})
	if bg, err := bs.Next(); err != nil || bg.Lock != session.LockGranted {
		t.Fatalf("first waiter after the release: %+v %v", bg, err)
	}
	next, err := cs.Next()
	if err != nil || next.Lock != session.LockQueued || !next.Next || next.Node != cq.Node || next.Rev != cq.Rev {
		t.Fatalf("second waiter after the first's grant: %+v %v, want queued and next, node %s", next, err, cq.Node)
	}

	b.rt(ctx, &session.Request{Type: session.MsgLockRelease, Node: bq.Node})
	if cg, err := cs.Next(); err != nil || cg.Lock != session.LockGranted {
		t.Fatalf("second waiter after the first's release: %+v %v", cg, err)
	}
	if _, err := cs.Next(); err != io.EOF {
		t.Fatalf("granted stream: %v, want its end", err)
	}
}
