package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/locksvc"
	"github.com/latch-io/latch/session"
)

// Lock timers commit through ticks proposed by the leader alone: a hold
// TTL ends and a lock-delay runs out with no other command coming.
func TestLockTicks(t *testing.T) {
	s := startDev(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	propose := func(cmd *namespace.Command) *namespace.Result {
		t.Helper()
		res, err := s.Propose(ctx, cmd)
		if err != nil || res.Err != nil {
			t.Fatalf("%v: %v %v", cmd.Op, err, res)
		}
		return res
	}
	sess := propose(&namespace.Command{Op: namespace.OpSessionOpen, TTLMillis: 60000, Secret: []byte("0123456789abcdef")}).Session
	// The hold TTL runs from the leader time stamped on the request, which
	// is taken after this instant: measuring from here is a true lower bound
	// however long the commit takes.
	start := time.Now()
	res := propose(&namespace.Command{Op: namespace.OpLockRequest, Path: "/ttl", Session: sess, HoldTTLMillis: 150, LockDelayMillis: 200})
	if len(res.Grants) != 1 {
		t.Fatalf("not granted: %+v", res)
	}
	waitCond(t, "hold TTL and lock-delay to end", func() error {
		q, err := s.Store().LockQueue("/ttl")
		if err != nil || len(q) > 0 {
			return fmt.Errorf("queue %+v %v", q, err)
		}
		return nil
	})
	if d := time.Since(start); d < 350*time.Millisecond {
		t.Fatalf("gone after %v, before hold TTL + lock-delay", d)
	}
	if _, ok := s.Store().NextTimer(); ok {
		t.Fatal("a timer is still due")
	}
}

// waitCond polls cond until it returns nil or 20s pass.
func waitCond(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
}

// lockConn is a raw client connection with one session, for driving the
// lock protocol frame by frame.
type lockConn struct {
	t      *testing.T
	conn   *session.Conn
	id     uint64
	secret []byte
}

func dialLock(t *testing.T, ctx context.Context, s *Server, resume *lockConn) *lockConn {
	t.Helper()
	conn, err := rawConn(t, ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	lc := &lockConn{t: t, conn: conn}
	req := &session.Request{Type: session.MsgOpenSession, TTLMillis: 10000}
	if resume != nil {
		req = &session.Request{Type: session.MsgResumeSession, Session: resume.id, Secret: resume.secret}
	}
	resp := lc.rt(ctx, req)
	lc.id, lc.secret = resp.Session, resp.Secret
	if resume != nil {
		lc.id, lc.secret = resume.id, resume.secret
	}
	return lc
}

// rt sends a unary request and fails the test on any error.
func (lc *lockConn) rt(ctx context.Context, req *session.Request) *session.Response {
	lc.t.Helper()
	resp, err := lc.try(ctx, req)
	if err != nil {
		lc.t.Fatalf("%v: %v", req.Type, err)
	}
	return resp
}

func (lc *lockConn) try(ctx context.Context, req *session.Request) (*session.Response, error) {
	if req.Session == 0 && req.Type != session.MsgOpenSession {
		req.Session = lc.id
	}
	resp, err := session.RoundTrip(ctx, lc.conn, req)
	if err != nil {
		return nil, err
	}
	return resp, resp.Err()
}

// lock opens a MsgLock stream and returns it with its first frame (or the
// error that ended it).
func (lc *lockConn) lock(ctx context.Context, req session.Request) (*session.StreamReader, *session.Response, error) {
	lc.t.Helper()
	req.Type, req.Session = session.MsgLock, lc.id
	sr, err := session.OpenStreaming(ctx, lc.conn, &req)
	if err != nil {
		lc.t.Fatal(err)
	}
	resp, err := sr.Next()
	return sr, resp, err
}

// notices opens the connection's lock notices stream and reads its
// acknowledgement, or the refusal that ended it.
func (lc *lockConn) notices(ctx context.Context) (*session.StreamReader, error) {
	lc.t.Helper()
	sr, err := session.OpenStreaming(ctx, lc.conn, &session.Request{Type: session.MsgLockNotices})
	if err != nil {
		lc.t.Fatal(err)
	}
	_, err = sr.Next()
	return sr, err
}

func TestLockProtocol(t *testing.T) {
	s := startDev(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, b := dialLock(t, ctx, s, nil), dialLock(t, ctx, s, nil)

	// Refused before anything is proposed.
	applied := s.Store().AppliedIndex()
	for _, tc := range []struct {
		req  session.Request
		want error
	}{
		{session.Request{Path: "/p", Mode: 7}, namespace.ErrBadCommand},
		{session.Request{Path: "/p", TimeoutMillis: -1}, namespace.ErrBadCommand},
		{session.Request{Path: "/p", Data: make([]byte, s.cfg.Limits.MaxDataBytes+1)}, namespace.ErrDataTooLarge},
	} {
		if _, _, err := a.lock(ctx, tc.req); !errors.Is(err, tc.want) {
			t.Fatalf("%+v: %v, want %v", tc.req, err, tc.want)
		}
	}
	sr, pg, err := a.lock(ctx, session.Request{Path: "/p"})
	sr.Close()
	if err != nil {
		t.Fatal(err) // (a valid request, for contrast: granted)
	}
	a.rt(ctx, &session.Request{Type: session.MsgLockRelease, Node: pg.Node})
	if _, err := a.try(ctx, &session.Request{Type: session.MsgLockRelease}); !errors.Is(err, namespace.ErrBadCommand) {
		t.Fatalf("release without node: %v", err)
	}
	if _, err := a.try(ctx, &session.Request{Type: session.MsgCheckSequencer}); !errors.Is(err, namespace.ErrBadCommand) {
		t.Fatalf("check without sequencer: %v", err)
	}
	noSession, err := session.OpenStreaming(ctx, a.conn, &session.Request{Type: session.MsgLock, Path: "/p"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := noSession.Next(); !errors.Is(err, session.ErrUnknownSession) {
		t.Fatalf("lock without a session: %v", err)
	}
	if got := s.Store().AppliedIndex(); got > applied+3 {
		t.Fatalf("refused requests were proposed: applied %d -> %d", applied, got)
	}

	// a holds /l: granted at once, one frame, and the stream ends there:
	// a held lock is no request in flight.
	held, g, err := a.lock(ctx, session.Request{Path: "/l"})
	if err != nil || g.Lock != session.LockGranted || g.Token == 0 || g.Rev != g.Token {
		t.Fatalf("first lock: %+v %v", g, err)
	}
	if _, err := held.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("held lock's stream after the grant: %v, want its end", err)
	}
	if n := s.front.locks.HeldCount(); n != 1 {
		t.Fatalf("%d held locks followed", n)
	}
	// a holds /q too and deletes its node before its notices stream opens.
	qs, qg, err := a.lock(ctx, session.Request{Path: "/q"})
	qs.Close()
	if err != nil || qg.Lock != session.LockGranted {
		t.Fatalf("lock /q: %+v %v", qg, err)
	}
	a.rt(ctx, &session.Request{Type: session.MsgDelete, Path: qg.Node, Version: namespace.AnyVersion})
	notes, err := a.notices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// /q's deletion before the stream opened waited for it; /p's release
	// by a itself was no news to a and left no notice before it.
	if n, err := notes.Next(); err != nil || n.Lock != session.LockGone || n.Node != qg.Node || n.Message != locksvc.GoneLost {
		t.Fatalf("queued notice: %+v %v (released /p is %s)", n, err, pg.Node)
	}
	sq := &session.Sequencer{Path: "/l", Token: g.Token, Session: a.id}
	if !b.rt(ctx, &session.Request{Type: session.MsgCheckSequencer, Sequencer: sq}).Valid {
		t.Fatal("holder's sequencer invalid")
	}
	// b: try fails and leaves nothing; a timed wait ends and leaves nothing.
	if _, _, err := b.lock(ctx, session.Request{Path: "/l", Try: true}); !errors.Is(err, session.ErrLocked) {
		t.Fatalf("try on a held lock: %v", err)
	}
	tsr, q, err := b.lock(ctx, session.Request{Path: "/l", TimeoutMillis: 50})
	if err != nil || q.Lock != session.LockQueued {
		t.Fatalf("timed wait: %+v %v", q, err)
	}
	if _, err := tsr.Next(); !errors.Is(err, session.ErrTimeout) {
		t.Fatalf("timed wait ended with %v", err)
	}
	if got := b.rt(ctx, &session.Request{Type: session.MsgLockQueue, Path: "/l"}).Locks; len(got) != 1 || got[0].Node != g.Node {
		t.Fatalf("queue after try and timeout: %+v", got)
	}

	// b waits; a's release ends a's stream with ErrNotHeld and grants b.
	wait, q, err := b.lock(ctx, session.Request{Path: "/l"})
	if err != nil || q.Lock != session.LockQueued || q.Rev <= g.Token {
		t.Fatalf("wait: %+v %v", q, err)
	}
	if _, err := b.try(ctx, &session.Request{Type: session.MsgLockRelease, Node: g.Node}); !errors.Is(err, session.ErrNotHeld) {
		t.Fatalf("b releasing a's lock: %v", err)
	}
	if _, _, err := b.lock(ctx, session.Request{Path: "/l", Node: g.Node}); !errors.Is(err, session.ErrNotHeld) {
		t.Fatalf("b re-attaching to a's request: %v", err)
	}
	// a holds /r as well; a's own release of /l is no news to a, the
	// deletion of /r is: the next notice is /r's.
	rs, rg, err := a.lock(ctx, session.Request{Path: "/r"})
	rs.Close()
	if err != nil || rg.Lock != session.LockGranted {
		t.Fatalf("lock /r: %+v %v", rg, err)
	}
	a.rt(ctx, &session.Request{Type: session.MsgLockRelease, Node: g.Node})
	a.rt(ctx, &session.Request{Type: session.MsgDelete, Path: rg.Node, Version: namespace.AnyVersion})
	if n, err := notes.Next(); err != nil || n.Lock != session.LockGone || n.Node != rg.Node || n.Message != locksvc.GoneLost {
		t.Fatalf("holder's next notice after its own release of %s: %+v %v", g.Node, n, err)
	}
	// One notices stream per connection.
	if _, err := a.notices(ctx); !errors.Is(err, session.ErrBusy) {
		t.Fatalf("second notices stream: %v", err)
	}
	bg, err := wait.Next()
	if err != nil || bg.Lock != session.LockGranted || bg.Node != q.Node || bg.Token <= g.Token {
		t.Fatalf("b's grant: %+v %v", bg, err)
	}
	if b.rt(ctx, &session.Request{Type: session.MsgCheckSequencer, Sequencer: sq}).Valid {
		t.Fatal("released sequencer still valid")
	}

	// a waits on a connection that then breaks: the request stays, a
	// re-attaches on a new connection, and a reset withdraws it.
	_, aq, err := a.lock(ctx, session.Request{Path: "/l"})
	if err != nil || aq.Lock != session.LockQueued {
		t.Fatalf("a waits: %+v %v", aq, err)
	}
	a.conn.Close()
	waitCond(t, "a's stream to end", func() error {
		if n := s.front.locks.WaiterCount(); n != 0 { // b holds: no stream
			return fmt.Errorf("%d lock streams", n)
		}
		return nil
	})
	if got := b.rt(ctx, &session.Request{Type: session.MsgLockQueue, Path: "/l"}).Locks; len(got) != 2 || got[1].Node != aq.Node {
		t.Fatalf("queue after a's connection broke: %+v", got)
	}
	a2 := dialLock(t, ctx, s, a)
	re, rq, err := a2.lock(ctx, session.Request{Path: "/l", Node: aq.Node})
	if err != nil || rq.Lock != session.LockQueued || rq.Node != aq.Node || rq.Rev != aq.Rev {
		t.Fatalf("re-attach: %+v %v", rq, err)
	}
	re.Close()
	waitCond(t, "reset withdraws the request", func() error {
		got := b.rt(ctx, &session.Request{Type: session.MsgLockQueue, Path: "/l"}).Locks
		if len(got) != 1 {
			return fmt.Errorf("queue %+v", got)
		}
		return nil
	})
	// b's held lock is followed for b's connection until it goes: the
	// notice waits for b's notices stream, opened late.
	if _, err := wait.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("b's stream after the grant: %v", err)
	}
	b.rt(ctx, &session.Request{Type: session.MsgDelete, Path: bg.Node, Version: namespace.AnyVersion})
	bn, err := b.notices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := bn.Next(); err != nil || n.Lock != session.LockGone || n.Node != bg.Node {
		t.Fatalf("b's notice: %+v %v", n, err)
	}
	waitCond(t, "nothing followed or waiting", func() error {
		if n := s.front.locks.HeldCount(); n != 0 {
			return fmt.Errorf("%d held locks followed", n)
		}
		if n := s.front.locks.WaiterCount(); n != 0 {
			return fmt.Errorf("%d lock streams registered", n)
		}
		return nil
	})
}

// MsgLockCall: a free lock is granted in the answer and followed like a
// grant on a stream; a request that must wait is answered Queued and
// waited for with MsgLock{Node}; a try-lock leaves nothing; a call
// cancelled before its answer withdraws its request.
func TestLockCall(t *testing.T) {
	s := startDev(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, b := dialLock(t, ctx, s, nil), dialLock(t, ctx, s, nil)
	call := func(lc *lockConn, req session.Request) (*session.Response, error) {
		req.Type = session.MsgLockCall
		return lc.try(ctx, &req)
	}
	queue := func(path string) []session.LockInfo {
		return b.rt(ctx, &session.Request{Type: session.MsgLockQueue, Path: path}).Locks
	}

	// Refused before anything is proposed.
	applied := s.Store().AppliedIndex()
	for _, tc := range []struct {
		req  session.Request
		want error
	}{
		{session.Request{Path: "/l", Node: "/l/lock-x-0000000001"}, namespace.ErrBadCommand},
		{session.Request{Path: "/l", Mode: 7}, namespace.ErrBadCommand},
		{session.Request{Path: "/l", Data: make([]byte, s.cfg.Limits.MaxDataBytes+1)}, namespace.ErrDataTooLarge},
	} {
		if _, err := call(a, tc.req); !errors.Is(err, tc.want) {
			t.Fatalf("%+v: %v, want %v", tc.req, err, tc.want)
		}
	}
	if resp, err := session.RoundTrip(ctx, a.conn, &session.Request{Type: session.MsgLockCall, Path: "/l"}); err != nil || !errors.Is(resp.Err(), session.ErrUnknownSession) {
		t.Fatalf("call without a session: %v %v", err, resp.Err())
	}
	if got := s.Store().AppliedIndex(); got != applied {
		t.Fatalf("refused calls were proposed: applied %d -> %d", applied, got)
	}

	// a's call on a free lock is its grant; the member follows the lock
	// for a's connection, with nothing waiting.
	g, err := call(a, session.Request{Path: "/l", RequestID: "a-1"})
	if err != nil || g.Lock != session.LockGranted || g.Token == 0 || g.Rev != g.Token {
		t.Fatalf("call on a free lock: %+v %v", g, err)
	}
	if again, err := call(a, session.Request{Path: "/l", RequestID: "a-1"}); err != nil || again.Lock != session.LockGranted || again.Node != g.Node || again.Token != g.Token {
		t.Fatalf("the same call again: %+v %v, want the same grant", again, err)
	}
	if n, w := s.front.locks.HeldCount(), s.front.locks.WaiterCount(); n != 1 || w != 0 {
		t.Fatalf("%d held locks followed, %d waiters", n, w)
	}

	// b: a try-lock call leaves nothing queued; a plain one queues.
	if _, err := call(b, session.Request{Path: "/l", Try: true}); !errors.Is(err, session.ErrLocked) {
		t.Fatalf("try call on a held lock: %v", err)
	}
	if got := queue("/l"); len(got) != 1 {
		t.Fatalf("queue after a try call: %+v", got)
	}
	q, err := call(b, session.Request{Path: "/l"})
	if err != nil || q.Lock != session.LockQueued || q.Node == "" || q.Rev <= g.Token {
		t.Fatalf("call on a held lock: %+v %v", q, err)
	}
	wait, wq, err := b.lock(ctx, session.Request{Path: "/l", Node: q.Node})
	if err != nil || wq.Lock != session.LockQueued || wq.Rev != q.Rev {
		t.Fatalf("waiting for the queued call: %+v %v", wq, err)
	}
	a.rt(ctx, &session.Request{Type: session.MsgLockRelease, Node: g.Node})
	bg, err := wait.Next()
	if err != nil || bg.Lock != session.LockGranted || bg.Node != q.Node || bg.Token <= g.Token {
		t.Fatalf("b's grant: %+v %v", bg, err)
	}
	wait.Close()

	// A call whose client left before the answer withdraws its request:
	// nobody learned its node.
	c := s.front.quic.NewConn("")
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	if _, err := s.front.locks.Call(cctx, c, &session.Request{Type: session.MsgLockCall, Path: "/m", Session: a.id}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	if got := queue("/m"); len(got) != 0 {
		t.Fatalf("a cancelled call left %+v", got)
	}
	if n := s.front.locks.HeldCount(); n != 1 { // b's
		t.Fatalf("%d held locks followed", n)
	}
}
