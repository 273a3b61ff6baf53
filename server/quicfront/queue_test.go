package quicfront

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/latch-io/latch/session"
)

// client is the source address of the n-th client of one host.
func client(n int) net.Addr { return &net.UDPAddr{IP: net.ParseIP("10.0.0.1"), Port: 10000 + n} }

func mustWait(t *testing.T, a *admission, n int, resume bool) time.Duration {
	t.Helper()
	v, w := a.reserve(client(n), resume)
	if v != session.AdmitNow && v != session.AdmitWait {
		t.Fatalf("client %d (resume %v): %v, %v; want a slot", n, resume, v, w)
	}
	if (v == session.AdmitNow) != (w == 0) {
		t.Fatalf("client %d: verdict %v with wait %v", n, v, w)
	}
	return w
}

// TestQueueSchedule: slots follow the bucket's rate; a reconnect is
// scheduled ahead of every new session already waiting, a new session
// behind everything; asking again gets the same slot without a second
// charge. Ignoring the priority, or charging a resend, moves a slot.
func TestQueueSchedule(t *testing.T) {
	a, clk := testAdmission(AdmissionConfig{HandshakeRate: 10, HandshakeBurst: 2})
	ms := time.Millisecond
	want := func(n int, resume bool, w time.Duration) {
		t.Helper()
		if got := mustWait(t, a, n, resume); got != w {
			t.Fatalf("client %d (resume %v) told to wait %v, want %v", n, resume, got, w)
		}
	}
	want(0, false, 0) // the burst: come now
	want(1, true, 0)
	want(2, false, 100*ms) // then one slot per 100ms at 10/s
	want(3, false, 200*ms)
	want(2, false, 100*ms) // a resend: the same slot, no charge
	// A reconnect goes ahead of the two new sessions waiting: it gets the
	// first slot after the burst, as if they were not there.
	want(4, true, 100*ms)
	want(5, true, 200*ms)
	// A new session waits behind everything: 2 new and 2 reconnects.
	want(6, false, 500*ms)
	want(7, true, 300*ms)
	if a.qstats.made.Load() != 8 {
		t.Fatalf("%d reservations made, want 8 (a resend is not one)", a.qstats.made.Load())
	}
	// Once the new sessions' slots went by, a reconnect queues behind
	// every token owed: 8 charged, 2 of the burst, 10/s → 600ms from the
	// start, 400ms from now.
	clk.add(200 * ms)
	want(8, true, 400*ms)
	// A queued answer is a storm's sign for the expiry hold.
	if !a.refusedWithin(time.Second) || !a.takingIn(time.Second) {
		t.Fatal("queued clients are not seen as being taken in")
	}
}

// TestQueueAdmitsReservedWithoutSecondCharge: an attempt from an address
// holding a due reservation is admitted although the bucket is empty, and
// costs nothing more: the bucket refills as if only the reservations had
// been charged. An early attempt is not one; an unreserved one waits for
// the queue.
func TestQueueAdmitsReservedWithoutSecondCharge(t *testing.T) {
	a, clk := testAdmission(AdmissionConfig{HandshakeRate: 10, HandshakeBurst: 1})
	if w := mustWait(t, a, 1, true); w != 0 {
		t.Fatalf("first client waits %v", w)
	}
	if w := mustWait(t, a, 2, true); w != 100*time.Millisecond {
		t.Fatalf("second client waits %v", w)
	}
	if _, err := a.Admit(client(1)); err != nil {
		t.Fatalf("client 1 with a slot now: %v", err)
	}
	if _, err := a.Admit(client(9)); !errors.Is(err, errAdmission) {
		t.Fatalf("an unreserved attempt while the queue owes a slot: %v, want refused", err)
	}
	if _, err := a.Admit(client(2)); !errors.Is(err, errAdmission) {
		t.Fatalf("client 2 100ms early: %v, want refused (it is not due)", err)
	}
	clk.add(100 * time.Millisecond)
	if _, err := a.Admit(client(2)); err != nil {
		t.Fatalf("client 2 at its slot: %v", err)
	}
	if u := a.qstats.used.Load(); u != 2 {
		t.Fatalf("%d reservations used, want 2", u)
	}
	// Two tokens were taken, by the two reservations: 100ms later the
	// bucket holds one again (a second charge would leave it empty).
	clk.add(100 * time.Millisecond)
	if _, err := a.Admit(client(9)); err != nil {
		t.Fatalf("an unreserved attempt once the queue is paid: %v (a reservation charged twice?)", err)
	}
	if _, err := a.Admit(client(10)); !errors.Is(err, errAdmission) {
		t.Fatalf("a second unreserved attempt: %v, want refused", err)
	}
	// A used reservation is gone: the address's next attempt is unreserved.
	if _, err := a.Admit(client(2)); !errors.Is(err, errAdmission) {
		t.Fatalf("client 2 again: %v, want refused", err)
	}
}

// TestQueueBounds: new sessions are queued at most newHorizon ahead,
// reconnects resumeHorizon; past that the answer is busy, with a time to
// ask again; and no more than maxReservations are held.
func TestQueueBounds(t *testing.T) {
	a, _ := testAdmission(AdmissionConfig{HandshakeRate: 10, HandshakeBurst: 1})
	n := 0
	for ; ; n++ {
		v, w := a.reserve(client(n), false)
		if v == session.AdmitBusy {
			if w < minBusyWait {
				t.Fatalf("busy with %v to wait", w)
			}
			break
		}
		if w > newHorizon {
			t.Fatalf("new session %d given a slot %v ahead", n, w)
		}
	}
	if n != 11 { // the burst's token, then 10 slots within a second
		t.Fatalf("%d new sessions queued, want 11", n)
	}
	// Reconnects still queue, ahead of those new sessions, up to their
	// horizon.
	r := 0
	for ; ; r++ {
		v, w := a.reserve(client(1000+r), true)
		if v == session.AdmitBusy {
			break
		}
		if w > resumeHorizon {
			t.Fatalf("reconnect %d given a slot %v ahead", r, w)
		}
	}
	if r != 30 {
		t.Fatalf("%d reconnects queued behind the new sessions, want 30 (3s at 10/s)", r)
	}
	if a.qstats.busy.Load() != 2 {
		t.Fatalf("busy answers %d, want 2", a.qstats.busy.Load())
	}

	big, _ := testAdmission(AdmissionConfig{HandshakeRate: 1e7, HandshakeBurst: 1})
	for i := range maxReservations {
		if v, w := big.reserve(client(i), true); v == session.AdmitBusy {
			t.Fatalf("reservation %d refused at %v", i, w)
		}
	}
	if v, _ := big.reserve(client(maxReservations), true); v != session.AdmitBusy {
		t.Fatalf("reservation past maxReservations: %v", v)
	}
	if big.reservations() != maxReservations {
		t.Fatalf("%d held, want %d", big.reservations(), maxReservations)
	}
}

// TestQueueExpiry: a reservation whose client does not come is forgotten
// reservationTTL past its slot (counted expired); its address then goes
// through the bucket like anyone's, and the queue no longer holds memory
// for it.
func TestQueueExpiry(t *testing.T) {
	a, clk := testAdmission(AdmissionConfig{HandshakeRate: 10, HandshakeBurst: 1})
	mustWait(t, a, 0, true) // come now: no refusal, no wait
	clk.add(5 * time.Second)
	if !a.refusedWithin(time.Second) {
		t.Fatal("a client holding a slot does not hold expiry")
	}
	delete(a.held, addrKey(client(0)))
	for i := range 5 {
		mustWait(t, a, i, true)
	}
	clk.add(400*time.Millisecond + reservationTTL)
	a.adjust(0)
	if h, e := a.reservations(), a.qstats.expired.Load(); h != 0 || e != 5 {
		t.Fatalf("%d held and %d expired after their TTL, want 0 and 5", h, e)
	}
	if a.refusedWithin(time.Second) {
		t.Fatal("the expiry hold outlives the reservations")
	}
	// 2.4s refilled the 4 owed tokens and the burst's: one attempt, not two.
	if _, err := a.Admit(client(0)); err != nil {
		t.Fatalf("a client whose slot expired, with a token: %v", err)
	}
	if _, err := a.Admit(client(1)); !errors.Is(err, errAdmission) {
		t.Fatalf("an expired reservation still admits: %v", err)
	}
	// Expiry found on the way: an attempt just past the TTL is unreserved.
	mustWait(t, a, 7, true)
	clk.add(reservationTTL + time.Second)
	a.bucket.tokens = 0
	if _, err := a.Admit(client(7)); !errors.Is(err, errAdmission) {
		t.Fatalf("an attempt %v past its slot: %v, want refused", reservationTTL+time.Second, err)
	}
	if e := a.qstats.expired.Load(); e != 6 {
		t.Fatalf("%d expired, want 6", e)
	}
}

// TestQueueAddressKey: a reservation made for an IPv4-mapped address
// matches the plain one, and only that port.
func TestQueueAddressKey(t *testing.T) {
	a, _ := testAdmission(AdmissionConfig{HandshakeRate: 10, HandshakeBurst: 1})
	mapped := &net.UDPAddr{IP: net.ParseIP("::ffff:10.0.0.1"), Port: 5000}
	if v, _ := a.reserve(mapped, true); v != session.AdmitNow {
		t.Fatalf("first reservation: %v", v)
	}
	if _, err := a.Admit(&net.UDPAddr{IP: net.ParseIP("10.0.0.1").To4(), Port: 5001}); err == nil {
		t.Fatal("another port used the reservation")
	}
	if _, err := a.Admit(&net.UDPAddr{IP: net.ParseIP("10.0.0.1").To4(), Port: 5000}); err != nil {
		t.Fatalf("the reserved address: %v", err)
	}
}
