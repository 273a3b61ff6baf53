package quicfront

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/latch-io/latch/session"
)

// fakeNow is a clock the test moves.
type fakeNow struct{ t time.Time }

func (f *fakeNow) now() time.Time      { return f.t }
func (f *fakeNow) add(d time.Duration) { f.t = f.t.Add(d) }
func addr(ip string) net.Addr          { return &net.UDPAddr{IP: net.ParseIP(ip), Port: 4000} }
func testAdmission(c AdmissionConfig) (*admission, *fakeNow) {
	c.FillDefaults()
	clk := &fakeNow{t: time.Unix(1000, 0)}
	return newAdmission(c, clk.now), clk
}

func TestAdmissionRateAndRefund(t *testing.T) {
	a, clk := testAdmission(AdmissionConfig{HandshakeRate: 10, HandshakeBurst: 5})
	var dones []func(session.HandshakeEnd)
	for i := range 5 {
		done, err := a.Admit(addr("10.0.0.1"))
		if err != nil {
			t.Fatalf("attempt %d within the burst refused: %v", i, err)
		}
		dones = append(dones, done)
	}
	if _, err := a.Admit(addr("10.0.0.2")); !errors.Is(err, errAdmission) {
		t.Fatalf("attempt past the burst: %v, want a refusal", err)
	}
	if a.refusals(refusedRate) != 1 || !a.refusedWithin(time.Second) {
		t.Fatalf("rate refusals %d, refusedWithin %v", a.refusals(refusedRate), a.refusedWithin(time.Second))
	}
	// A resumed handshake gives most of its token back: two make room
	// for one more.
	dones[0](session.HandshakeResumed)
	if _, err := a.Admit(addr("10.0.0.2")); err == nil {
		t.Fatal("three quarters of a token admitted an attempt")
	}
	dones[1](session.HandshakeResumed)
	if _, err := a.Admit(addr("10.0.0.2")); err != nil {
		t.Fatalf("after a resumed handshake's refund: %v", err)
	}
	// A tenth of a second refills one token at 10/s.
	clk.add(100 * time.Millisecond)
	if _, err := a.Admit(addr("10.0.0.3")); err != nil {
		t.Fatalf("after a refill: %v", err)
	}
	if a.refusedWithin(time.Second) == false {
		t.Fatal("the refusal 100ms ago is forgotten")
	}
	clk.add(2 * time.Second)
	if a.refusedWithin(time.Second) {
		t.Fatal("a refusal 2s ago still counts as recent")
	}
}

func TestAdmissionInFlight(t *testing.T) {
	a, _ := testAdmission(AdmissionConfig{HandshakeRate: 1000, HandshakeBurst: 100, MaxHandshakesInFlight: 2})
	d1, err1 := a.Admit(addr("10.0.0.1"))
	_, err2 := a.Admit(addr("10.0.0.1"))
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if _, err := a.Admit(addr("10.0.0.1")); err == nil || a.refusals(refusedInFlight) != 1 {
		t.Fatalf("third in flight: %v, refusals %d", err, a.refusals(refusedInFlight))
	}
	d1(session.HandshakeFull)
	if _, err := a.Admit(addr("10.0.0.1")); err != nil {
		t.Fatalf("after one finished: %v", err)
	}
}

// A host whose handshakes fail (TLS refused its credentials) is refused
// once its budget is spent; one that abandons handshakes, or another
// host, is not.
func TestAdmissionFailingHost(t *testing.T) {
	a, clk := testAdmission(AdmissionConfig{HandshakeRate: 10000, HandshakeBurst: 10000, FailedHandshakesPerHost: 5})
	bad, good := addr("10.0.0.66"), addr("10.0.0.7")
	for i := range 10 { // the burst is twice the rate
		done, err := a.Admit(bad)
		if err != nil {
			t.Fatalf("failure %d of the bad host refused too early: %v", i, err)
		}
		done(session.HandshakeFailed)
	}
	if _, err := a.Admit(bad); err == nil || a.refusals(refusedHost) != 1 {
		t.Fatalf("bad host past its budget: %v, refusals %d", err, a.refusals(refusedHost))
	}
	if a.refusedWithin(time.Second) {
		t.Fatal("a failing host's refusal held expiry (only load refusals may)")
	}
	for range 50 {
		done, err := a.Admit(good)
		if err != nil {
			t.Fatalf("the good host refused: %v", err)
		}
		done(session.HandshakeAbandoned)
	}
	clk.add(time.Second) // 5 failures' worth back
	if _, err := a.Admit(bad); err != nil {
		t.Fatalf("bad host after its budget refilled: %v", err)
	}
}

func TestAdmissionAdjustsToLag(t *testing.T) {
	a, _ := testAdmission(AdmissionConfig{HandshakeRate: 1000, LagLimit: 20 * time.Millisecond})
	for range 20 {
		a.adjust(50 * time.Millisecond)
	}
	if r := a.rateNow.Load(); r != 100 {
		t.Fatalf("rate after a long lag %d, want the floor 100", r)
	}
	a.adjust(time.Millisecond)
	if r := a.rateNow.Load(); r != 200 {
		t.Fatalf("rate after one quiet interval %d, want 200", r)
	}
	for range 20 {
		a.adjust(time.Millisecond)
	}
	if r := a.rateNow.Load(); r != 1000 {
		t.Fatalf("rate after quiet intervals %d, want the cap 1000", r)
	}
}

func TestAdmissionProbesPerHost(t *testing.T) {
	a, clk := testAdmission(AdmissionConfig{ProbesPerHost: 3})
	for i := range 3 {
		if !a.probe("10.0.0.1") {
			t.Fatalf("probe %d dropped", i)
		}
	}
	if a.probe("10.0.0.1") || !a.probe("10.0.0.2") {
		t.Fatal("the flood's fourth probe answered, or another host's dropped")
	}
	clk.add(time.Second)
	if !a.probe("10.0.0.1") {
		t.Fatal("probe after a refill dropped")
	}
}

// takingIn, what holds a new leader's expiry (package lease, expiryCutoff), lasts while
// clients are refused for load, while a handshake is in flight, and for
// the window after the last one ended: the last clients of a reconnect
// storm, admitted once the others are in, are still being taken back.
func TestAdmissionTakingIn(t *testing.T) {
	a, clk := testAdmission(AdmissionConfig{HandshakeRate: 10, HandshakeBurst: 1})
	if a.takingIn(time.Second) {
		t.Fatal("taking in before any attempt")
	}
	done, err := a.Admit(addr("10.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	clk.add(5 * time.Second)
	if !a.takingIn(time.Second) {
		t.Fatal("a handshake in flight for 5s does not count")
	}
	done(session.HandshakeResumed)
	clk.add(500 * time.Millisecond)
	if !a.takingIn(time.Second) {
		t.Fatal("a handshake that ended 500ms ago does not count")
	}
	clk.add(time.Second)
	if a.takingIn(time.Second) {
		t.Fatal("taking in 1.5s after the last handshake ended, with no refusal")
	}
}

// Handshakes in flight are bounded by what the member completes in
// handshakeTarget, and an interval in which clients abandoned more than a
// quarter of the handshakes that ended halves the rate: a starved member
// no longer admits handshakes its clients give up on before it gets to
// them.
func TestAdmissionFollowsCompletions(t *testing.T) {
	a, clk := testAdmission(AdmissionConfig{HandshakeRate: 1000, HandshakeBurst: 4, MaxHandshakesInFlight: 1024})
	admit := func(n int) []func(session.HandshakeEnd) {
		var out []func(session.HandshakeEnd)
		for range n {
			clk.add(time.Second) // refill the bucket: only the bound in flight may refuse
			done, err := a.Admit(addr("10.0.0.1"))
			if err != nil {
				break
			}
			out = append(out, done)
		}
		return out
	}
	// Nothing completed yet: the bound is the burst.
	a.adjust(0)
	in := admit(10)
	if len(in) != 4 {
		t.Fatalf("admitted %d in flight with no completions, want the burst 4", len(in))
	}
	// The member completes 4 per interval (40/s) however many wait: the
	// bound follows what completes in handshakeTarget once the average
	// has caught up.
	for range 30 {
		for _, d := range in[:4] {
			d(session.HandshakeFull)
		}
		in = in[4:]
		a.adjust(0)
		in = append(in, admit(100)...)
	}
	if want := int(40 * handshakeTarget.Seconds()); len(in) < want-2 || len(in) > want+2 {
		t.Fatalf("%d in flight completing 40/s, want about %d", len(in), want)
	}
	rate := a.bucket.rate
	// Clients abandon most of what ends: the rate halves.
	for i, d := range in {
		if i%4 == 0 {
			d(session.HandshakeFull)
		} else {
			d(session.HandshakeAbandoned)
		}
	}
	a.adjust(0)
	if a.bucket.rate != rate/2 {
		t.Fatalf("rate %v after an interval of mostly abandoned handshakes, want %v", a.bucket.rate, rate/2)
	}
}

// A failing host's handshakes already in flight when its budget runs out
// are all charged: it waits every one of them off, instead of failing
// again as soon as one token came back (a flood with 64 handshakes in
// flight failed five times its budget).
func TestAdmissionFailingHostPaysForItsBurst(t *testing.T) {
	a, clk := testAdmission(AdmissionConfig{HandshakeRate: 10000, HandshakeBurst: 10000, FailedHandshakesPerHost: 5})
	bad := addr("10.0.0.66")
	var dones []func(session.HandshakeEnd)
	for i := range 30 { // in flight at once: none has failed yet
		done, err := a.Admit(bad)
		if err != nil {
			t.Fatalf("attempt %d refused before any failure: %v", i, err)
		}
		dones = append(dones, done)
	}
	for _, d := range dones {
		d(session.HandshakeFailed)
	}
	// 30 failures against a budget of 10 (twice 5/s): 20 owed, 4s to
	// wait off at 5/s, plus one token to pass.
	clk.add(time.Second)
	if _, err := a.Admit(bad); err == nil {
		t.Fatal("a host that failed 30 handshakes at once admitted a second later")
	}
	clk.add(4 * time.Second)
	if _, err := a.Admit(bad); err != nil {
		t.Fatalf("after waiting its failures off: %v", err)
	}
}
