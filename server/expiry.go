package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// leaseKeeper is the leader's view of sessions: their lease deadlines
// (session.LeaseTable, renewed by keepalives without touching the log),
// each session's identity for the per-identity limit, and the reaper that
// commits the expiry of sessions whose lease ran out. It serves only
// while this member is the ready leader and the table was loaded in its
// current term.
type leaseKeeper struct {
	s     *Server
	clock session.Clock
	table *session.LeaseTable

	mu       sync.Mutex
	ready    bool              // table loaded for term
	term     uint64            // leadership term the table was loaded in
	identity map[uint64]string // quota key (caps.go) of each session
	count    map[string]int    // open sessions per quota key
	pending  map[string]int    // opens in flight per quota key
	// pendingAll is the sum of pending.
	pendingAll int
	// reserved maps the secret of each open in flight to its quota key:
	// the first of opened and the reservation's release to run moves it
	// out of pending, so a session that committed is never counted both
	// as open and as in flight.
	reserved map[string]string
	// restores is the FSM's snapshot-install count when the table was
	// loaded: a backup restored on the leader replaces the sessions, and
	// the table is loaded again.
	restores uint64
	// loadedAt is when the table was loaded (k.clock): expiry is held
	// while clients are still being turned away, up to MaxReconnectGrace
	// after it (expiryCutoff).
	loadedAt time.Time
}

// sessionUse returns the sessions open or opening in all, those of the
// busiest identity with a certificate, and those of the busiest host
// without one.
func (k *leaseKeeper) sessionUse() (total, busiest, anonymous int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, n := range k.count {
		if key != "" && key[0] == 0 {
			anonymous = max(anonymous, n+k.pending[key])
		} else {
			busiest = max(busiest, n+k.pending[key])
		}
	}
	return len(k.identity) + k.pendingAll, busiest, anonymous
}

// clockFunc adapts Config.Clock to session.Clock.
type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

func newLeaseKeeper(s *Server, now func() time.Time) *leaseKeeper {
	clock := clockFunc(now)
	return &leaseKeeper{
		s:        s,
		clock:    clock,
		table:    session.NewLeaseTable(clock),
		identity: map[uint64]string{},
		count:    map[string]int{},
		pending:  map[string]int{},
		reserved: map[string]string{},
	}
}

// serving returns nil when session requests may be served here: this
// member is the ready leader and its lease table was reset in this term.
// A leader still loading answers ErrNoLeader, which clients retry.
func (k *leaseKeeper) serving() error {
	if err := k.s.running(); err != nil {
		return err
	}
	ready, term, _ := k.s.leader.get()
	if !ready || !k.s.IsLeader() {
		return k.s.notLeader()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.ready || k.term != term {
		return fmt.Errorf("%w: the new leader is loading sessions", session.ErrNoLeader)
	}
	return nil
}

// reserve takes a slot for a session of identity, failing with
// ErrTooManySessions, naming the cap, when the cluster has MaxSessions or
// the identity its cap (MaxSessionsPerIdentity, MaxAnonymousSessions for
// "") open or being opened. secret names the open (the secret it
// proposes): opened with it turns the slot into an open session. The
// release func gives a slot back that opened did not take.
func (k *leaseKeeper) reserve(identity, host string, secret []byte) (release func(), err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	cfg := &k.s.cfg
	if total := len(k.identity) + k.pendingAll; total >= cfg.MaxSessions {
		k.s.front.capRefusals.counter(capSessions).Add(1)
		return nil, capError(session.ErrTooManySessions, capSessions, cfg.MaxSessions, "the cluster")
	}
	key := quotaKey(identity, host)
	name, limit := cfg.sessionCap(key)
	if k.count[key]+k.pending[key] >= limit {
		k.s.front.capRefusals.counter(name).Add(1)
		who := fmt.Sprintf("identity %q", identity)
		if identity == "" {
			who = fmt.Sprintf("clients without a certificate on host %s (present one for your identity's own quota)", host)
		}
		return nil, capError(session.ErrTooManySessions, name, limit, who)
	}
	k.pending[key]++
	k.pendingAll++
	k.reserved[string(secret)] = key
	return func() {
		k.mu.Lock()
		k.unreserve(secret)
		k.mu.Unlock()
	}, nil
}

// unreserve gives back the slot of the open named by secret, if it still
// holds one. The caller holds k.mu.
func (k *leaseKeeper) unreserve(secret []byte) {
	key, ok := k.reserved[string(secret)]
	if !ok {
		return
	}
	delete(k.reserved, string(secret))
	if k.pending[key]--; k.pending[key] <= 0 {
		delete(k.pending, key)
	}
	k.pendingAll--
}

// opened starts the lease of a session whose open just committed, counted
// under quota key identity, and ends the reservation of its open (named
// by the session's secret) if this member made it. The observer and the
// open handler both call it; the first one wins.
func (k *leaseKeeper) opened(id uint64, ttl time.Duration, identity string, secret []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.unreserve(secret)
	if _, ok := k.identity[id]; ok {
		return
	}
	k.identity[id] = identity
	k.count[identity]++
	k.table.Add(id, ttl)
}

// gone forgets a session whose close or expiry was applied.
func (k *leaseKeeper) gone(id uint64) {
	k.table.Remove(id)
	k.mu.Lock()
	defer k.mu.Unlock()
	identity, ok := k.identity[id]
	if !ok {
		return
	}
	delete(k.identity, id)
	if k.count[identity]--; k.count[identity] <= 0 {
		delete(k.count, identity)
	}
}

// Applied starts the leases of sessions a batch opened and forgets those it
// ended. It runs on the FSM goroutine of every member. Opens are handled
// here as well as by the open handler because a handler whose client went
// away never learns the id of a session that did commit: without a lease
// it would never expire. Only the serving leader reads the new sessions'
// TTLs; elsewhere this is a scan of the events.
func (k *leaseKeeper) Applied(results []*namespace.Result) {
	for _, r := range results {
		for _, ev := range r.Events {
			switch ev.Type {
			case namespace.EventSessionOpened:
				if k.isReady() {
					if si, err := k.s.store.Session(ev.Session); err == nil {
						k.opened(si.ID, time.Duration(si.TTLMillis)*time.Millisecond, quotaKey(si.Identity, si.Host), si.Secret)
					}
				}
			case namespace.EventSessionClosed, namespace.EventSessionExpired:
				k.gone(ev.Session)
			}
		}
	}
}

func (k *leaseKeeper) isReady() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ready
}

// renew extends id's lease; false when it is unknown or expiring.
func (k *leaseKeeper) renew(id uint64) (time.Duration, bool) { return k.table.Renew(id) }

// retime restarts id's lease with a new TTL, one a committed command
// recorded (a lease-per-lock renewal); false when it is unknown or
// expiring.
func (k *leaseKeeper) retime(id uint64, ttl time.Duration) bool { return k.table.Retime(id, ttl) }

// expiresIn is the lease id has left as this member sees it (0 when it is
// not the serving leader or does not know id).
func (k *leaseKeeper) expiresIn(id uint64) time.Duration {
	if k.serving() != nil {
		return 0
	}
	deadline, _, ok := k.table.Deadline(id)
	if !ok {
		return 0
	}
	return max(deadline.Sub(k.clock.Now()), 0)
}

// sessions is the number of sessions whose leases this member keeps (0 unless
// it is the leader).
func (k *leaseKeeper) sessions() int {
	if k.serving() != nil {
		return 0
	}
	return k.table.Len()
}

// run follows leadership until stop: on every term won it loads the
// sessions and reaps them until the term ends.
func (k *leaseKeeper) run(stop <-chan struct{}) {
	k.s.followLeadership(stop, k.lead)
}

func (k *leaseKeeper) loadedRestores() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.restores
}

// unready stops serving session requests.
func (k *leaseKeeper) unready() {
	k.mu.Lock()
	k.ready = false
	k.mu.Unlock()
}

// lead loads the sessions for the current term and runs the reaper. It
// returns whether leadership was (re)gained meanwhile, which makes run
// load again for the new term.
func (k *leaseKeeper) lead(stop <-chan struct{}, sub <-chan bool) bool {
	defer k.unready()
	if err := k.load(); err != nil {
		k.s.log.Error("cannot load sessions; retrying", "err", err)
		select {
		case <-stop:
			return false
		case l := <-sub:
			return l
		case <-time.After(k.s.cfg.ExpiryTick):
			return k.s.IsLeader()
		}
	}
	tick := k.s.cfg.ExpiryTick
	timer := time.NewTimer(tick)
	defer timer.Stop()
	for {
		if !k.reap(stop) {
			return k.s.IsLeader()
		}
		if k.s.fsm.restores.Load() != k.loadedRestores() {
			if err := k.load(); err != nil {
				k.s.log.Error("cannot load sessions after a restore; retrying", "err", err)
			}
		}
		wait := tick
		if deadline, ok := k.table.NextDeadline(); ok {
			if cutoff, may := k.expiryCutoff(); may {
				wait = min(max(deadline.Sub(cutoff), 0), tick)
			}
		}
		timer.Reset(wait)
		select {
		case <-stop:
			return false
		case l := <-sub:
			// false: the term ended. true: a new term began without an
			// observed loss (leadership publishes false first, but a slow
			// reader sees only the latest): load again.
			return l
		case <-k.table.Wake():
		case <-timer.C:
		}
	}
}

// load gives every session in the namespace a full TTL from now (the old
// leader's deadlines are unknown, so none may expire earlier than a TTL
// after its last possible keepalive) and starts serving.
func (k *leaseKeeper) load() error {
	_, term, _ := k.s.leader.get()
	restores := k.s.fsm.restores.Load()
	all, err := k.s.store.Sessions()
	if err != nil {
		return err
	}
	ttls := make(map[uint64]time.Duration, len(all))
	identity := make(map[uint64]string, len(all))
	count := map[string]int{}
	for _, si := range all {
		ttls[si.ID] = time.Duration(si.TTLMillis) * time.Millisecond
		key := quotaKey(si.Identity, si.Host)
		identity[si.ID] = key
		count[key]++
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	grace := reconnectGrace(len(all), k.s.cfg.Admission.HandshakeRate, k.s.cfg.MaxReconnectGrace)
	k.table.ResetAll(ttls, grace)
	k.identity, k.count = identity, count
	k.ready, k.term, k.restores, k.loadedAt = true, term, restores, k.clock.Now()
	k.s.log.Info("sessions loaded", "sessions", len(all), "term", term, "reconnect_grace", grace)
	return nil
}

// reap commits the expiry of every session past its deadline, in batches
// of ExpiryBatch. It returns false when this member can no longer propose
// (it lost leadership or is stopping).
func (k *leaseKeeper) reap(stop <-chan struct{}) bool {
	cutoff, may := k.expiryCutoff()
	if !may {
		return true
	}
	for {
		ids := k.table.ExpiredBy(k.s.cfg.ExpiryBatch, cutoff)
		if len(ids) == 0 {
			return true
		}
		ctx, cancel := context.WithTimeout(k.s.ctx, k.s.cfg.ApplyTimeout)
		res, err := k.s.Propose(ctx, &namespace.Command{Op: namespace.OpSessionExpire, Sessions: ids})
		cancel()
		if err == nil && res.Err != nil {
			err = res.Err
		}
		if err != nil {
			// Not committed, or perhaps committed: either way the ids go
			// back, and expiring one that is already gone is harmless.
			k.table.Requeue(ids)
			var nl *NotLeaderError
			if errors.As(err, &nl) || errors.Is(err, ErrClosed) {
				return false
			}
			k.s.log.Warn("session expiry not committed; retrying", "sessions", len(ids), "err", err)
			select {
			case <-stop:
				return false
			case <-time.After(k.s.cfg.ExpiryTick):
			}
			continue
		}
		for _, id := range ids {
			k.gone(id) // also for sessions that were gone already
		}
		k.s.log.Debug("sessions expired", "sessions", len(ids), "rev", res.Index)
	}
}

// reconnectGrace is the time a new leader adds to every session's first
// lease: twice what admitting one connection per session takes at the
// admission rate (admission.go), at most limit. With expiryCutoff it makes
// the rule: a session whose client is alive and reconnecting is not
// expired because the leader was slow to take it back; a dead client's
// session still ends within TTL + limit of the leader change (ExpiryTick
// later at most).
func reconnectGrace(sessions int, rate float64, limit time.Duration) time.Duration {
	if sessions == 0 || rate <= 0 {
		return 0
	}
	return min(limit, time.Duration(2*float64(sessions)/rate*float64(time.Second)))
}

// expiryHoldWindow is how recent admission control's last refusal or
// handshake must be for expiry to wait: longer than a refused client's
// way back to the gate (its back-off, at most client.Config.MaxBackoff,
// 1s, after a refusal it may only notice at its 1s handshake timeout),
// so the last clients of a storm, back off and about to be admitted, are
// still covered.
const expiryHoldWindow = 3 * time.Second

// expiryCutoff returns the latest deadline that may be expired now, or
// false while expiry waits altogether: within MaxReconnectGrace of the
// table's load, after admission control refused a client for load, while
// it is still taking clients in (it refused an attempt for load or ended
// a handshake within expiryHoldWindow, or one is in flight). Those
// clients are alive and trying; the leader is what is slow (Chubby's
// grace period, made to last as long as the reconnect storm does, and no
// longer than MaxReconnectGrace). See expiryCutoff (the function) for
// the rule.
func (k *leaseKeeper) expiryCutoff() (time.Time, bool) {
	k.mu.Lock()
	loaded := k.loadedAt
	k.mu.Unlock()
	var takingIn, refusing bool
	if adm := k.admission(); adm != nil {
		// A storm is one that admission refused since the load: a leader
		// that let every client straight in has no one left outside, and
		// the connections it keeps taking are ordinary traffic.
		takingIn = adm.refusedSince(loaded) && adm.takingIn(expiryHoldWindow)
		refusing = adm.refusedWithin(expiryHoldWindow)
	}
	return expiryCutoff(k.clock.Now(), loaded, k.s.cfg.MaxReconnectGrace, takingIn, refusing)
}

func (k *leaseKeeper) admission() *admission {
	if k.s.front == nil {
		return nil
	}
	return k.s.front.adm
}

// expiryCutoff is the rule of both holds. Within maxGrace of the table's
// load (a leader change) nothing expires while clients are being taken in.
// Afterwards, while admission control refuses clients for load (a leader
// overloaded in steady state: a client whose keepalive went unanswered
// reconnects and is turned away), a session expires only maxGrace past
// its deadline: its client may be one of those refused. A dead client's
// session therefore ends at most TTL + maxGrace after its last keepalive
// or the leader change (and at TTL when the leader refuses nobody).
func expiryCutoff(now, loaded time.Time, maxGrace time.Duration, takingIn, refusing bool) (time.Time, bool) {
	if !loaded.IsZero() && now.Sub(loaded) < maxGrace && takingIn {
		return time.Time{}, false
	}
	if refusing {
		return now.Add(-maxGrace), true
	}
	return now, true
}
