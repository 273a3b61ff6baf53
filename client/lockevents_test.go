package client

import (
	"testing"
	"time"
)

// TestLockEvents: a watch with Locks sees a lock's grant, the conflicting
// request, the release and the next grant, with tokens, holders and
// causes, in revision order; the conflicting request is reported at the
// revision that queued it (the same applied entry, not a later one), and
// Mutex.Contended closes for the holder, both for a request queued while
// it holds and for one already waiting when it was granted.
func TestLockEvents(t *testing.T) {
	tc := startLockCluster(t, 3)
	c1, c2, c3 := tc.dial(3*time.Second), tc.dial(3*time.Second), tc.dial(3*time.Second)
	ctx := testCtx(t)

	w, err := c3.Watch(ctx, "/lev", Locks())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// A node watch of the same path: Locks is what brings lock events.
	plain, err := c3.Watch(ctx, "/lev", Data(), Children())
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()

	m1 := NewMutex(c1.Session(), "/lev")
	if err := m1.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	contended := m1.Contended()
	select {
	case <-contended:
		t.Fatal("Contended closed with nobody waiting")
	default:
	}
	m2 := NewMutex(c2.Session(), "/lev")
	got2 := lockAsync(ctx, m2.Lock)
	q := waitQueue(t, c3, "/lev", "second request queued", queueShape(true, false))
	wait(t, "m1.Contended after a conflicting request", contended)

	// The third request waits behind m2: m2 is told at its grant.
	m3 := NewMutex(c3.Session(), "/lev")
	got3 := lockAsync(ctx, m3.Lock)
	waitQueue(t, c3, "/lev", "third request queued", queueShape(true, false, false))
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	done(t, got2, "m2.Lock")
	wait(t, "m2.Contended for a request already waiting at its grant", m2.Contended())
	// m2's session closes: its hold ends with that cause.
	if err := c2.Session().Close(ctx); err != nil {
		t.Fatal(err)
	}
	done(t, got3, "m3.Lock")

	type want struct {
		typ    EventType
		node   string
		sess   uint64
		token  uint64
		cause  string
		waiter uint64 // the waiter's session
	}
	n1, tok1 := q[0].Node, q[0].Token
	wants := []want{
		{EventLockGranted, n1, c1.Session().ID(), tok1, "", 0},
		{EventLockContended, n1, c1.Session().ID(), tok1, "", c2.Session().ID()},
		{EventLockContended, n1, c1.Session().ID(), tok1, "", c3.Session().ID()},
		{EventLockReleased, n1, c1.Session().ID(), tok1, "released", 0},
		{EventLockGranted, q[1].Node, c2.Session().ID(), 0, "", 0},
		{EventLockContended, q[1].Node, c2.Session().ID(), 0, "", c3.Session().ID()},
		{EventLockReleased, q[1].Node, c2.Session().ID(), 0, "session-closed", 0},
		{EventLockGranted, m3.Node(), c3.Session().ID(), m3.Token(), "", 0},
	}
	var last uint64
	var grant2 uint64
	for i, wt := range wants {
		ev := nextEvent(t, w)
		if ev.Type != wt.typ || ev.Path != wt.node || ev.Session != wt.sess || ev.Cause != wt.cause || ev.WaiterSession != wt.waiter {
			t.Fatalf("event %d: got %+v, want %+v", i, ev, wt)
		}
		if wt.token != 0 && ev.Token != wt.token {
			t.Fatalf("event %d: token %d, want %d", i, ev.Token, wt.token)
		}
		if ev.Revision < last {
			t.Fatalf("event %d at revision %d after revision %d", i, ev.Revision, last)
		}
		last = ev.Revision
		switch i {
		case 1: // within the commit that queued m2's request
			if ev.Revision != q[1].Rev || ev.Waiter != q[1].Node {
				t.Fatalf("conflicting request told at revision %d (%s), m2's request is revision %d (%s)",
					ev.Revision, ev.Waiter, q[1].Rev, q[1].Node)
			}
		case 4:
			grant2 = ev.Token
			if ev.Token != ev.Revision || ev.Token <= tok1 {
				t.Fatalf("second grant's token %d at revision %d after token %d", ev.Token, ev.Revision, tok1)
			}
		case 5: // told with its grant: the same revision
			if ev.Revision != grant2 || ev.Token != grant2 {
				t.Fatalf("waiting request told at revision %d, the grant was %d", ev.Revision, grant2)
			}
		}
	}
	// The node watch got node events only.
	for {
		select {
		case ev := <-plain.Events():
			if ev.Token != 0 || ev.Type.IsLock() {
				t.Fatalf("node watch got lock event %+v", ev)
			}
			continue
		default:
		}
		break
	}
	if err := m3.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, w); ev.Type != EventLockReleased || ev.Cause != "released" {
		t.Fatalf("after m3.Unlock: %+v", ev)
	}
}

// TestContendedEndsWithHold: the watch behind Contended ends when the
// hold does, and a new Lock starts afresh.
func TestContendedEndsWithHold(t *testing.T) {
	tc := startLockCluster(t, 1)
	c1, c2 := tc.dial(3*time.Second), tc.dial(3*time.Second)
	ctx := testCtx(t)
	m := NewMutex(c1.Session(), "/cend")
	if m.Contended() != nil {
		t.Fatal("Contended before Lock is not nil")
	}
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	first := m.Contended()
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Another session locks after the release: no conflict with a hold
	// that ended.
	o := NewMutex(c2.Session(), "/cend")
	if err := o.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	got := lockAsync(ctx, m.Lock)
	waitQueue(t, c2, "/cend", "m waits", queueShape(true, false))
	wait(t, "o.Contended", o.Contended())
	select {
	case <-first:
		t.Fatal("the released hold's Contended closed for a later request")
	default:
	}
	if err := o.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	done(t, got, "m.Lock")
	select {
	case <-m.Contended():
		t.Fatal("new hold contended with nobody waiting")
	default:
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRWMutexContended: readers are told when a writer queues behind
// them; another reader does not contend with them.
func TestRWMutexContended(t *testing.T) {
	tc := startLockCluster(t, 1)
	c1, c2, c3 := tc.dial(3*time.Second), tc.dial(3*time.Second), tc.dial(3*time.Second)
	ctx := testCtx(t)
	r1, r2 := NewRWMutex(c1.Session(), "/rwc"), NewRWMutex(c2.Session(), "/rwc")
	if err := r1.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	contended := r1.Contended()
	if err := r2.RLock(ctx); err != nil {
		t.Fatal(err)
	}
	w := NewRWMutex(c3.Session(), "/rwc")
	got := lockAsync(ctx, w.Lock)
	// Every lock-contended event since r1's grant names the writer:
	// readers do not contend with each other.
	lw, err := c3.Watch(ctx, "/rwc", Locks(), FromRevision(r1.Revision()-1))
	if err != nil {
		t.Fatal(err)
	}
	defer lw.Close()
	wait(t, "r1.Contended after a writer queued", contended)
	wait(t, "r2.Contended after a writer queued", r2.Contended())
	for seen := 0; seen < 2; {
		ev := nextEvent(t, lw)
		if ev.Type != EventLockContended {
			continue
		}
		if ev.WaiterSession != c3.Session().ID() {
			t.Fatalf("a reader contended with %+v", ev)
		}
		seen++
	}
	if err := r1.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r2.RUnlock(ctx); err != nil {
		t.Fatal(err)
	}
	done(t, got, "w.Lock")
}
