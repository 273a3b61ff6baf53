package quicfront

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latch-io/latch/session"
)

// Admission control: what keeps a member's CPU for raft when thousands of
// clients connect at once (a failover, a deploy, a host opening
// connections in a loop). Every new client connection attempt passes
// admit before quic-go starts its handshake; a refusal is one
// CONNECTION_REFUSED packet, no cryptography, which clients take as
// "busy" and back off from (jittered, see package client). Three gates:
//
//   - A token bucket of full-handshake cost (HandshakeRate per second,
//     HandshakeBurst at once). An attempt takes one token; a handshake that
//     turns out to be resumed (a TLS ticket: no certificates signed or
//     checked) gives most of it back.
//   - A bound on handshakes in flight (MaxHandshakesInFlight).
//   - Per host, a budget of failed handshakes (FailedHandshakesPerHost per
//     second): a host whose attempts keep failing (no certificate, another
//     CA) spends its budget and is refused before it costs a signature.
//     Hosts whose handshakes succeed are never limited by it.
//
// The bucket's rate also follows the member's own health: a ticker
// measures how late the Go scheduler wakes it. A late wake means runnable
// goroutines are waiting for a CPU, raft's heartbeat goroutines among
// them; the rate is then halved (down to a tenth of HandshakeRate) and
// grows back by a tenth per quiet interval (AIMD). So the cost of
// admitting new clients never crowds out the traffic that keeps the
// leader a leader, whatever the machine's speed.
//
// Admitted handshakes must also finish while their clients still wait
// (a client gives a silent handshake up after a second and tries again,
// and the work done for it is lost). Under a reconnect storm on a
// starved machine the new leader held 400-550 handshakes in flight and
// finished about 100 a second: they took 4-5s, and more were abandoned
// than completed. So the handshakes in flight are bounded by what the
// member completes in handshakeTarget (Little's law on the completions
// measured per interval, at least HandshakeBurst), and an interval in
// which clients abandoned more than a quarter of the handshakes that
// ended halves the rate as a late scheduler does.

// AdmissionConfig bounds how fast a member lets new client connections in.
type AdmissionConfig struct {
	// HandshakeRate is the full TLS handshakes per second this member
	// admits at most, when it is not short of CPU. Default 400 (a full
	// handshake costs the server about 1ms of CPU: at most 40% of a core
	// goes to them).
	HandshakeRate float64
	// HandshakeBurst is how many may start at once after a quiet spell.
	// Default 32.
	HandshakeBurst int
	// MaxHandshakesInFlight bounds handshakes started and not finished.
	// Each holds quic-go's connection state until it ends (a client that
	// vanishes mid-handshake holds it for the handshake timeout): the
	// bound is on memory; HandshakeRate bounds the CPU. Default 1024.
	MaxHandshakesInFlight int
	// FailedHandshakesPerHost is how many failed handshakes per second one
	// host may cause (burst: twice that); beyond it the host's attempts
	// are refused. Default 20.
	FailedHandshakesPerHost float64
	// ProbesPerHost bounds the leader probes one host gets answered per
	// second (burst: the same); more are dropped unanswered (clients
	// resend). Default 20000: one host may run thousands of clients
	// that look for the leader at once, and a probe dropped makes its
	// client probe again.
	ProbesPerHost float64
	// LagLimit is the scheduler lateness above which the handshake rate is
	// halved. Default 20ms.
	LagLimit time.Duration
}

// Admission defaults.
const (
	DefaultHandshakeRate           = 400
	DefaultHandshakeBurst          = 32
	DefaultMaxHandshakesInFlight   = 1024
	DefaultFailedHandshakesPerHost = 20
	DefaultProbesPerHost           = 20000
	DefaultLagLimit                = 20 * time.Millisecond
)

// FillDefaults sets the fields left zero to their defaults.
func (a *AdmissionConfig) FillDefaults() {
	if a.HandshakeRate == 0 {
		a.HandshakeRate = DefaultHandshakeRate
	}
	if a.HandshakeBurst == 0 {
		a.HandshakeBurst = DefaultHandshakeBurst
	}
	if a.MaxHandshakesInFlight == 0 {
		a.MaxHandshakesInFlight = DefaultMaxHandshakesInFlight
	}
	if a.FailedHandshakesPerHost == 0 {
		a.FailedHandshakesPerHost = DefaultFailedHandshakesPerHost
	}
	if a.ProbesPerHost == 0 {
		a.ProbesPerHost = DefaultProbesPerHost
	}
	if a.LagLimit == 0 {
		a.LagLimit = DefaultLagLimit
	}
}

// Validate returns an error naming the first bad field
// ("Admission.Field: why"; the member wraps it in its config error).
func (a AdmissionConfig) Validate() error {
	bad := func(field, format string, v ...any) error {
		return fmt.Errorf("Admission.%s: %s", field, fmt.Sprintf(format, v...))
	}
	switch {
	case a.HandshakeRate < 1:
		return bad("HandshakeRate", "%v must be at least 1 per second", a.HandshakeRate)
	case a.HandshakeBurst < 1:
		return bad("HandshakeBurst", "%d must be at least 1", a.HandshakeBurst)
	case a.MaxHandshakesInFlight < 1:
		return bad("MaxHandshakesInFlight", "%d must be at least 1", a.MaxHandshakesInFlight)
	case a.FailedHandshakesPerHost < 1:
		return bad("FailedHandshakesPerHost", "%v must be at least 1 per second", a.FailedHandshakesPerHost)
	case a.ProbesPerHost < 1:
		return bad("ProbesPerHost", "%v must be at least 1 per second", a.ProbesPerHost)
	case a.LagLimit < time.Millisecond:
		return bad("LagLimit", "%v is below 1ms", a.LagLimit)
	}
	return nil
}

// errAdmission is why an attempt was refused; quic-go only logs it, the
// client sees CONNECTION_REFUSED.
var errAdmission = errors.New("latch: connection refused by admission control")

// bucket is a token bucket whose rate may change. Not safe for concurrent
// use: its owner locks.
type bucket struct {
	tokens, burst, rate float64
	last                time.Time
}

func newBucket(rate, burst float64, now time.Time) bucket {
	return bucket{tokens: burst, burst: burst, rate: rate, last: now}
}

func (b *bucket) refill(now time.Time) {
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
		b.last = now
	}
}

// take spends n tokens if there are at least n (or, for n ≤ 1, any).
func (b *bucket) take(n float64, now time.Time) bool {
	b.refill(now)
	if b.tokens < min(n, 1) {
		return false
	}
	b.tokens -= n
	return true
}

// give returns n tokens (a resumed handshake's refund).
func (b *bucket) give(n float64) { b.tokens = min(b.burst, b.tokens+n) }

// Refusal reasons, the admission metric's label values.
const (
	refusedRate     = "rate"
	refusedInFlight = "in_flight"
	refusedHost     = "failing_host"
	droppedProbe    = "probe"
)

// maxHosts bounds the per-host tables; past it the stalest host is
// forgotten, so spoofed source addresses cannot grow them.
const maxHosts = 8192

// handshakeTarget is how long an admitted handshake may wait for its
// turn: well within a client's patience (client: one second of silence).
const handshakeTarget = 500 * time.Millisecond

// resumeRefund is the share of a token a resumed handshake gives back:
// measured here, a resumed server handshake costs about a fifth of a full
// one (no signature, no chain verification).
const resumeRefund = 0.75

type admission struct {
	cfg AdmissionConfig
	now func() time.Time

	mu       sync.Mutex
	bucket   bucket
	inFlight int
	// flightCap bounds inFlight below MaxHandshakesInFlight: what the
	// member completes in handshakeTarget (adjust). completions is the
	// smoothed completion rate per second; lastDone and lastLost the
	// counts of ends (completed, abandoned) adjust saw last.
	flightCap          int
	completions        float64
	lastDone, lastLost uint64
	failing            map[string]*bucket // hosts that had a failed handshake
	probes             map[string]*bucket
	// held are the reservations by source address (queue.go); newAhead
	// the slots of new sessions' reservations still ahead, in order.
	held     map[string]reservation
	newAhead []time.Time
	qstats   queueStats

	refused  sync.Map         // reason → *atomic.Uint64
	lastRef  atomic.Int64     // unix nanos of the last refused connection attempt
	lastEnd  atomic.Int64     // unix nanos of the last admitted handshake's end
	ends     [4]atomic.Uint64 // handshakes ended, by session.HandshakeEnd
	rateNow  atomic.Uint64
	lagNanos atomic.Int64 // the worst scheduler lateness of the last interval
}

func newAdmission(cfg AdmissionConfig, now func() time.Time) *admission {
	a := &admission{
		cfg:     cfg,
		now:     now,
		bucket:  newBucket(cfg.HandshakeRate, float64(cfg.HandshakeBurst), now()),
		failing: map[string]*bucket{},
		probes:  map[string]*bucket{},
		held:    map[string]reservation{},
	}
	a.flightCap = cfg.MaxHandshakesInFlight
	a.rateNow.Store(uint64(cfg.HandshakeRate))
	return a
}

var _ session.Admission = (*admission)(nil)

func (a *admission) refuse(reason string) error {
	v, _ := a.refused.LoadOrStore(reason, new(atomic.Uint64))
	v.(*atomic.Uint64).Add(1)
	if reason != droppedProbe && reason != refusedHost {
		a.lastRef.Store(a.now().UnixNano())
	}
	return fmt.Errorf("%w (%s)", errAdmission, reason)
}

// handshaking returns the handshakes in flight.
func (a *admission) handshaking() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.inFlight
}

// refusedWithin reports whether a connection attempt was refused for load
// (rate or in flight; not a failing host's), or queued or told busy,
// within d, or a client holds a reservation now: one about to come back
// is as much alive and trying as one turned away (a storm's last clients
// are told "come now", and expiry must not run between the answer and
// their resume).
func (a *admission) refusedWithin(d time.Duration) bool {
	last := a.lastRef.Load()
	return (last != 0 && a.now().Sub(time.Unix(0, last)) < d) || a.reservations() > 0
}

// takingIn reports whether clients are still being taken in: an attempt
// was refused for load (or queued, or told busy), or an admitted
// handshake ended, within d, or one is in flight or reserved now.
func (a *admission) takingIn(d time.Duration) bool {
	if a.refusedWithin(d) || a.handshaking() > 0 || a.reservations() > 0 {
		return true
	}
	last := a.lastEnd.Load()
	return last != 0 && a.now().Sub(time.Unix(0, last)) < d
}

// refusals returns the count of refusals for reason.
func (a *admission) refusals(reason string) uint64 {
	v, ok := a.refused.Load(reason)
	if !ok {
		return 0
	}
	return v.(*atomic.Uint64).Load()
}

// Admit implements session.Admission.
func (a *admission) Admit(remote net.Addr) (func(session.HandshakeEnd), error) {
	host := remoteHost(remote)
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if fb := a.failing[host]; fb != nil {
		fb.refill(now)
		if fb.tokens < 1 {
			return nil, a.refuse(refusedHost)
		}
	}
	if a.inFlight < a.cfg.MaxHandshakesInFlight && a.takeReservation(remote, now) {
		// Charged when it was reserved (queue.go).
		a.inFlight++
		return func(how session.HandshakeEnd) { a.ended(host, how) }, nil
	}
	if a.inFlight >= min(a.cfg.MaxHandshakesInFlight, a.flightCap) {
		return nil, a.refuse(refusedInFlight)
	}
	if !a.bucket.take(1, now) {
		return nil, a.refuse(refusedRate)
	}
	a.inFlight++
	return func(how session.HandshakeEnd) { a.ended(host, how) }, nil
}

// ended books a handshake's end: the slot in flight, the refund of a
// resumed one, the failure budget of the host of a failed one.
func (a *admission) ended(host string, how session.HandshakeEnd) {
	a.ends[how].Add(1)
	now := a.now()
	a.lastEnd.Store(now.UnixNano())
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inFlight--
	switch how {
	case session.HandshakeResumed:
		a.bucket.give(resumeRefund)
	case session.HandshakeFailed:
		fb := a.failing[host]
		if fb == nil {
			if len(a.failing) >= maxHosts {
				forgetStalest(a.failing)
			}
			b := newBucket(a.cfg.FailedHandshakesPerHost, 2*a.cfg.FailedHandshakesPerHost, now)
			fb = &b
			a.failing[host] = fb
		}
		// Below zero if need be: the handshakes a host had in flight all
		// fail once its budget is spent, and it waits every one of them
		// off (take would stop at zero, and a host with 64 in flight
		// failed five times its budget).
		fb.refill(now)
		fb.tokens--
	}
}

// probe reports whether a leader probe from host should be answered.
func (a *admission) probe(host string) bool {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	pb := a.probes[host]
	if pb == nil {
		if len(a.probes) >= maxHosts {
			forgetStalest(a.probes)
		}
		b := newBucket(a.cfg.ProbesPerHost, a.cfg.ProbesPerHost, now)
		pb = &b
		a.probes[host] = pb
	}
	if !pb.take(1, now) {
		a.refuse(droppedProbe)
		return false
	}
	return true
}

// remoteHost is the IP of a client address ("" when it has none).
func remoteHost(a net.Addr) string {
	if u, ok := a.(*net.UDPAddr); ok {
		return u.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// forgetStalest drops the host least recently seen. Linear, and only run
// when a table is full.
func forgetStalest(m map[string]*bucket) {
	var stalest string
	var at time.Time
	for h, b := range m {
		if stalest == "" || b.last.Before(at) {
			stalest, at = h, b.last
		}
	}
	delete(m, stalest)
}

// lagTick is how often the lag monitor wakes.
const lagTick = 10 * time.Millisecond

// watchLag runs until stop: every lagTick it measures how late it woke,
// and every ten ticks it sets the handshake rate from the worst lateness
// seen (AIMD), and forgets per-host budgets that refilled.
func (a *admission) watchLag(stop <-chan struct{}) {
	t := time.NewTicker(lagTick)
	defer t.Stop()
	var worst time.Duration
	n := 0
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			// The ticker's channel holds the time it fired; the lateness is
			// how long this goroutine waited to run after that.
			if late := time.Since(now); late > worst {
				worst = late
			}
			if n++; n < 10 {
				continue
			}
			a.adjust(worst)
			a.lagNanos.Store(int64(worst))
			worst, n = 0, 0
		}
	}
}

// adjust halves the handshake rate after an interval in which the
// scheduler was late by more than LagLimit, or clients abandoned more
// than a quarter of the handshakes that ended, else grows it by a tenth
// of HandshakeRate; never below a tenth of it. It sets the bound on
// handshakes in flight from the completions of the interval (lagTick·10).
func (a *admission) adjust(worst time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	done := a.ends[session.HandshakeFull].Load() + a.ends[session.HandshakeResumed].Load()
	lost := a.ends[session.HandshakeAbandoned].Load()
	dDone, dLost := done-a.lastDone, lost-a.lastLost
	a.lastDone, a.lastLost = done, lost
	const interval = 10 * lagTick
	a.completions = 0.7*a.completions + 0.3*float64(dDone)/interval.Seconds()
	a.flightCap = max(a.cfg.HandshakeBurst, int(a.completions*handshakeTarget.Seconds()))
	abandoning := dLost >= 4 && 4*dLost > dDone+dLost
	r := a.bucket.rate
	if worst > a.cfg.LagLimit || abandoning {
		r = max(a.cfg.HandshakeRate/10, r/2)
	} else {
		r = min(a.cfg.HandshakeRate, r+a.cfg.HandshakeRate/10)
	}
	a.bucket.refill(a.now())
	a.bucket.rate = r
	a.rateNow.Store(uint64(r))
	now := a.now()
	for h, b := range a.failing {
		if b.refill(now); b.tokens >= b.burst {
			delete(a.failing, h)
		}
	}
	for h, b := range a.probes {
		if b.refill(now); b.tokens >= b.burst {
			delete(a.probes, h)
		}
	}
	a.expireReservations(now)
}
