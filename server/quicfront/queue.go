package quicfront

import (
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/latch-io/latch/session"
)

// The admission queue. A client about to dial asks the leader in its
// probe for admission (session.Ask); the answer is always heard, unlike
// the CONNECTION_REFUSED of a refused attempt, which quic-go sends from a
// queue of four and drops past it, so that a refused client could not
// tell "busy" from "dead" and came back every second. The answer is a
// slot on the admission schedule, reserved for the client's exact source
// address (host:port, the socket it dials from):
//
//   - The schedule is the token bucket itself, allowed into debt: a
//     reservation takes its token when it is made, and its slot is when
//     the bucket, refilling at its current rate, would have that token.
//     "Come now" when the bucket has one, else "come in W".
//   - Reconnects go first: a reconnect's slot is computed as if the new
//     sessions' reservations still ahead were not there (they keep their
//     promised slots; the member admits at most their count beyond its
//     rate, bounded by newHorizon's worth), and new sessions queue behind
//     everything.
//   - The queue is bounded: a reconnect is given a slot at most
//     resumeHorizon ahead, a new session newHorizon ahead, and at most
//     maxReservations are held; past that the answer is "busy, ask again
//     in W", W the time the queue takes to drain to half its horizon.
//   - A reservation is used by the first connection attempt from its
//     address at or after its slot (dueSlack early at most): Admit lets
//     it in without charging the bucket again, past the in-flight cap
//     measured from completions (the schedule paces those attempts
//     already), never past MaxHandshakesInFlight (memory). One unused
//     for reservationTTL past its slot is forgotten (its token is not
//     given back: the slot went by unused).
//   - Asking again from the same address (a lost answer, a resend) gets
//     the same slot without a second charge.
//
// Attempts without a reservation (old clients, a client whose ask went
// unanswered) pass the bucket as before, so they come after the queue.
// Probe floods stay bounded by ProbesPerHost, reservations by
// maxReservations and their age.

// Queue bounds.
const (
	// resumeHorizon and newHorizon: how far ahead a reconnect and a new
	// session may be given a slot.
	resumeHorizon = 3 * time.Second
	newHorizon    = time.Second
	// maxReservations bounds the reservations held at once.
	maxReservations = 8192
	// reservationTTL is how long past its slot a reservation waits for
	// its client's first packet.
	reservationTTL = 2 * time.Second
	// dueSlack is how early before its slot a reserved attempt counts.
	dueSlack = 20 * time.Millisecond
	// minBusyWait is the least "ask again" a busy answer gives.
	minBusyWait = 100 * time.Millisecond
)

// reservation is a slot held for one source address.
type reservation struct {
	at     time.Time
	resume bool
}

// queueStats are the queue's counters (metrics.go).
type queueStats struct {
	made, used, expired, busy atomic.Uint64
	waited                    atomic.Int64 // nanoseconds of waits given, summed
}

// addrKey names a source address the same way for a probe and for a
// connection attempt.
func addrKey(a net.Addr) string {
	if u, ok := a.(*net.UDPAddr); ok {
		ap := u.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
	}
	return a.String()
}

// reserve answers a client at from that asks for admission: a slot now
// or W ahead (AdmitNow, AdmitWait), or AdmitBusy with when to ask again.
func (a *admission) reserve(from net.Addr, resume bool) (session.Admit, time.Duration) {
	key := addrKey(from)
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if r, ok := a.held[key]; ok && now.Before(r.at.Add(reservationTTL)) {
		return admitAt(r.at.Sub(now))
	}
	a.bucket.refill(now)
	a.popDueNew(now)
	rate := a.bucket.rate
	deficit := 1 - a.bucket.tokens
	horizon := newHorizon
	if resume {
		horizon = resumeHorizon
		deficit -= float64(len(a.newAhead))
	}
	wait := time.Duration(max(0, deficit) / rate * float64(time.Second))
	if wait > horizon || len(a.held) >= maxReservations {
		a.qstats.busy.Add(1)
		a.lastRef.Store(now.UnixNano())
		return session.AdmitBusy, max(minBusyWait, wait-horizon/2)
	}
	at := now.Add(wait)
	a.bucket.tokens--
	a.held[key] = reservation{at: at, resume: resume}
	if !resume && wait > 0 {
		a.newAhead = append(a.newAhead, at)
	}
	a.qstats.made.Add(1)
	a.qstats.waited.Add(int64(wait))
	if wait > 0 {
		// Turned away for now: as much a sign of a storm as a refusal
		// (expiry.go holds sessions while clients are being taken in).
		a.lastRef.Store(now.UnixNano())
	}
	return admitAt(wait)
}

func admitAt(wait time.Duration) (session.Admit, time.Duration) {
	if wait <= 0 {
		return session.AdmitNow, 0
	}
	return session.AdmitWait, wait
}

// popDueNew forgets the new sessions' slots that are no longer ahead.
// Slots are appended in order (each takes a later token), so the due
// ones are at the front.
func (a *admission) popDueNew(now time.Time) {
	i := 0
	for i < len(a.newAhead) && !a.newAhead[i].After(now) {
		i++
	}
	if i > 0 {
		a.newAhead = append(a.newAhead[:0], a.newAhead[i:]...)
	}
}

// takeReservation reports whether from holds a reservation due now, and
// uses it up. Called with a.mu held.
func (a *admission) takeReservation(from net.Addr, now time.Time) bool {
	if len(a.held) == 0 {
		return false
	}
	key := addrKey(from)
	r, ok := a.held[key]
	switch {
	case !ok:
		return false
	case !now.Before(r.at.Add(reservationTTL)):
		delete(a.held, key)
		a.qstats.expired.Add(1)
		return false
	case now.Before(r.at.Add(-dueSlack)):
		return false // early: it goes through the bucket, the slot stays
	}
	delete(a.held, key)
	a.qstats.used.Add(1)
	return true
}

// expireReservations forgets reservations unused reservationTTL past
// their slot. Called with a.mu held.
func (a *admission) expireReservations(now time.Time) {
	for k, r := range a.held {
		if !now.Before(r.at.Add(reservationTTL)) {
			delete(a.held, k)
			a.qstats.expired.Add(1)
		}
	}
	a.popDueNew(now)
}

// reservations returns how many are held.
func (a *admission) reservations() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.held)
}

// queueWait is the wait a reconnect asking now would be told.
func (a *admission) queueWait() time.Duration {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.bucket.refill(now)
	a.popDueNew(now)
	return time.Duration(max(0, 1-a.bucket.tokens-float64(len(a.newAhead))) / a.bucket.rate * float64(time.Second))
}
