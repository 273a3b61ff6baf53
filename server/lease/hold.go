package lease

import "time"

// reconnectGrace is the time a new leader adds to every session's first
// lease: twice what admitting one connection per session takes at the
// admission rate, at most limit. With expiryCutoff it makes the rule: a
// session whose client is alive and reconnecting is not expired because
// the leader was slow to take it back; a dead client's session still
// ends within TTL + limit of the leader change (ExpiryTick later at
// most).
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
func (k *Keeper) expiryCutoff() (time.Time, bool) {
	k.mu.Lock()
	loaded := k.loadedAt
	k.mu.Unlock()
	now := k.clock.Now()
	var takingIn, refusing bool
	if adm := k.adm; adm != nil {
		// A storm is one that admission refused since the load: a leader
		// that let every client straight in has no one left outside, and
		// the connections it keeps taking are ordinary traffic. The load
		// is told to admission as the time since it (see Admission).
		takingIn = !loaded.IsZero() && adm.RefusedWithin(now.Sub(loaded)) && adm.TakingIn(expiryHoldWindow)
		refusing = adm.RefusedWithin(expiryHoldWindow)
	}
	return expiryCutoff(now, loaded, k.cfg.MaxReconnectGrace, takingIn, refusing)
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
