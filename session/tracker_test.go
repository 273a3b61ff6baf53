package session

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
)

// events returns the transitions published so far.
func events(tr *Tracker) []State {
	var got []State
	for {
		select {
		case s, ok := <-tr.Events():
			if !ok {
				return got
			}
			got = append(got, s)
		default:
			return got
		}
	}
}

func TestTrackerJeopardyReconnectedExpired(t *testing.T) {
	clk := NewManualClock(epoch)
	const ttl = 9 * time.Second
	tr := NewTracker(clk, epoch, ttl)
	if s := tr.State(); s != StateConnected {
		t.Fatalf("initial state %v", s)
	}
	if !tr.Deadline().Equal(epoch.Add(ttl)) {
		t.Fatalf("Deadline = %v", tr.Deadline())
	}

	// Keepalive at 3s, acked: lease now ends at 12s.
	clk.Advance(3 * time.Second)
	sent := clk.Now()
	tr.Sent(sent)
	clk.Advance(100 * time.Millisecond)
	tr.Acked(sent, ttl)
	if !tr.Deadline().Equal(sent.Add(ttl)) {
		t.Fatalf("Deadline after ack = %v, want %v", tr.Deadline(), sent.Add(ttl))
	}
	if at, ok := tr.NextCheck(); !ok || !at.Equal(sent.Add(ttl)) {
		t.Fatalf("NextCheck = %v %v", at, ok)
	}
	// An older ack never shortens the lease.
	tr.Acked(epoch, ttl)
	if !tr.Deadline().Equal(sent.Add(ttl)) {
		t.Fatal("an old ack moved the deadline back")
	}

	// No more acks: at the lease end, jeopardy.
	clk.Advance(ttl - 100*time.Millisecond - time.Nanosecond)
	if s := tr.Poll(); s != StateConnected {
		t.Fatalf("just before lease end: %v", s)
	}
	clk.Advance(time.Nanosecond)
	if s := tr.Poll(); s != StateJeopardy {
		t.Fatalf("at lease end: %v", s)
	}
	if at, _ := tr.NextCheck(); !at.Equal(sent.Add(2 * ttl)) {
		t.Fatalf("NextCheck in jeopardy = %v, want lease end + grace", at)
	}

	// A keepalive sent during jeopardy reaches a new leader and is acked:
	// reconnected.
	clk.Advance(2 * time.Second)
	sent2 := clk.Now()
	tr.Sent(sent2)
	tr.Acked(sent2, ttl)
	if s := tr.State(); s != StateReconnected {
		t.Fatalf("after ack in jeopardy: %v", s)
	}

	// Silence again past lease end and the whole grace period: expired.
	clk.Advance(ttl)
	if s := tr.Poll(); s != StateJeopardy {
		t.Fatalf("second lease end: %v", s)
	}
	clk.Advance(ttl - time.Nanosecond)
	select {
	case <-tr.Done():
		t.Fatal("Done closed before grace ended")
	default:
	}
	clk.Advance(time.Nanosecond)
	if s := tr.Poll(); s != StateExpired {
		t.Fatalf("after grace: %v", s)
	}
	select {
	case <-tr.Done():
	default:
		t.Fatal("Done not closed on expiry")
	}
	if !errors.Is(tr.Err(), ErrSessionExpired) {
		t.Fatalf("Err = %v", tr.Err())
	}
	want := []State{StateJeopardy, StateReconnected, StateJeopardy, StateExpired}
	if got := events(tr); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	// Final: acks change nothing, Done stays closed (closing twice would
	// panic), NextCheck has nothing to wait for.
	tr.Acked(clk.Now(), ttl)
	tr.Expire(ErrUnknownSession)
	if s := tr.Poll(); s != StateExpired {
		t.Fatalf("after late ack: %v", s)
	}
	if _, ok := tr.NextCheck(); ok {
		t.Fatal("NextCheck after expiry")
	}
}

func TestTrackerExpiredByServer(t *testing.T) {
	for _, serverErr := range []error{
		CodeSessionExpired.Err("latch: session expired: 5"),
		CodeUnknownSession.Err("latch: unknown session 5"),
		CodeNoSession.Err("latch: no such session"),
	} {
		if !IsExpiry(serverErr) {
			t.Fatalf("IsExpiry(%v) = false", serverErr)
		}
		clk := NewManualClock(epoch)
		tr := NewTracker(clk, epoch, 10*time.Second)
		tr.Expire(serverErr)
		if s := tr.State(); s != StateExpired {
			t.Fatalf("state %v", s)
		}
		if err := tr.Err(); !errors.Is(err, ErrSessionExpired) || !errors.Is(err, errors.Unwrap(serverErr)) {
			t.Fatalf("Err = %v: must match ErrSessionExpired and keep the cause", err)
		}
		if got := events(tr); fmt.Sprint(got) != fmt.Sprint([]State{StateExpired}) {
			t.Fatalf("events %v", got)
		}
	}
	if IsExpiry(CodeNotLeader.Err("")) || IsExpiry(errors.New("x")) {
		t.Fatal("IsExpiry true for a non-expiry error")
	}
}

func TestTrackerLongSilenceGoesThroughJeopardy(t *testing.T) {
	clk := NewManualClock(epoch)
	tr := NewTracker(clk, epoch, time.Second)
	clk.Advance(time.Hour) // e.g. the process was suspended
	if s := tr.Poll(); s != StateExpired {
		t.Fatalf("state %v", s)
	}
	want := []State{StateJeopardy, StateExpired}
	if got := events(tr); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

func TestTrackerStaleAckDoesNotEndJeopardy(t *testing.T) {
	clk := NewManualClock(epoch)
	const ttl = 10 * time.Second
	tr := NewTracker(clk, epoch, ttl)
	sent := epoch.Add(time.Second)
	tr.Sent(sent)
	clk.Advance(ttl + 5*time.Second) // 15s: jeopardy
	if s := tr.Poll(); s != StateJeopardy {
		t.Fatalf("state %v", s)
	}
	// The ack of the keepalive sent at 1s arrives now: the lease it proves
	// ended at 11s, already past. Still in jeopardy, but the grace period
	// now counts from 11s.
	tr.Acked(sent, ttl)
	if s := tr.State(); s != StateJeopardy {
		t.Fatalf("stale ack ended jeopardy: %v", s)
	}
	if at, _ := tr.NextCheck(); !at.Equal(sent.Add(2 * ttl)) {
		t.Fatalf("NextCheck = %v", at)
	}
}

func TestTrackerEventsNeverBlock(t *testing.T) {
	clk := NewManualClock(epoch)
	const ttl = time.Second
	tr := NewTracker(clk, epoch, ttl)
	// Nobody reads Events: 2*eventBuffer transitions must not block, and
	// the newest survive.
	for i := range eventBuffer {
		clk.Advance(ttl)
		tr.Poll() // jeopardy
		tr.Acked(clk.Now(), ttl)
		_ = i
	}
	got := events(tr)
	if len(got) != eventBuffer || got[len(got)-1] != StateReconnected {
		t.Fatalf("buffered %d events ending %v", len(got), got[len(got)-1])
	}
}

func TestIsExpiryNamespaceError(t *testing.T) {
	if !IsExpiry(fmt.Errorf("create: %w", namespace.ErrNoSession)) {
		t.Fatal("namespace.ErrNoSession is an expiry")
	}
}

// TestTrackerHoldWhileTheClusterAnswers: a client the cluster answers but
// has not taken back yet (refused for load, an election) keeps its
// session one TTL past the last answer, up to the limit past the plain
// grace; without Hold it expires at the plain grace.
func TestTrackerHoldWhileTheClusterAnswers(t *testing.T) {
	const ttl, limit = 10 * time.Second, 45 * time.Second
	clk := NewManualClock(epoch)
	plain := NewTracker(clk, epoch, ttl)
	held := NewTracker(clk, epoch, ttl)
	// Lease end at 10s, plain grace to 20s. The cluster keeps answering
	// "busy" every second from 5s on.
	for clk.Now().Before(epoch.Add(25 * time.Second)) {
		clk.Advance(time.Second)
		held.Hold(clk.Now(), 0, limit)
	}
	if s := plain.Poll(); s != StateExpired {
		t.Fatalf("without Hold, 25s after the open: %v, want expired", s)
	}
	if s := held.Poll(); s != StateJeopardy {
		t.Fatalf("held, 25s after the open: %v, want jeopardy", s)
	}
	if at, ok := held.NextCheck(); !ok || !at.Equal(clk.Now().Add(ttl)) {
		t.Fatalf("NextCheck = %v %v, want a TTL after the last Hold", at, ok)
	}
	// A window longer than the TTL (a connection attempt's length) holds
	// that long.
	held.Hold(clk.Now(), 3*ttl, limit)
	if at, _ := held.NextCheck(); !at.Equal(clk.Now().Add(3 * ttl)) {
		t.Fatalf("NextCheck = %v, want the window after the Hold", at)
	}
	// An ack ends the jeopardy as usual.
	sent := clk.Now()
	held.Acked(sent, ttl)
	if s := held.Poll(); s != StateReconnected {
		t.Fatalf("after the ack: %v", s)
	}

	// Answers that never end do not hold a session past the limit: lease
	// end 10s, grace 10s, limit 45s: expired at 65s.
	clk2 := NewManualClock(epoch)
	tr := NewTracker(clk2, epoch, ttl)
	for clk2.Now().Before(epoch.Add(64 * time.Second)) {
		clk2.Advance(time.Second)
		tr.Hold(clk2.Now(), 0, limit)
		if s := tr.Poll(); s == StateExpired {
			t.Fatalf("expired at %v, before the limit", clk2.Now().Sub(epoch))
		}
	}
	clk2.Advance(time.Second)
	tr.Hold(clk2.Now(), 0, limit)
	if s := tr.Poll(); s != StateExpired {
		t.Fatalf("at 65s, held past the limit: %v", s)
	}
}
