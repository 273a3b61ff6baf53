package lease

import (
	"context"
	"time"

	"github.com/latch-io/latch/namespace"
)

// Lead loads the sessions for the current term and runs the reaper until
// ctx ends or sub (the member's leadership: false when a term ends, true
// when one is won) says the term changed. It returns whether this member
// leads (again) by then, which makes the caller's follow-leadership loop
// call it once more for the new term.
func (k *Keeper) Lead(ctx context.Context, sub <-chan bool) bool {
	defer k.unready()
	if err := k.load(); err != nil {
		k.log.Error("cannot load sessions; retrying", "err", err)
		select {
		case <-ctx.Done():
			return false
		case l := <-sub:
			return l
		case <-time.After(k.cfg.ExpiryTick):
			return k.leader.IsLeader()
		}
	}
	tick := k.cfg.ExpiryTick
	timer := time.NewTimer(tick)
	defer timer.Stop()
	for {
		if !k.reap(ctx) {
			return k.leader.IsLeader()
		}
		if k.store.Restores() != k.loadedRestores() {
			if err := k.load(); err != nil {
				k.log.Error("cannot load sessions after a restore; retrying", "err", err)
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
		case <-ctx.Done():
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

func (k *Keeper) loadedRestores() uint64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.restores
}

// unready stops serving session requests.
func (k *Keeper) unready() {
	k.mu.Lock()
	k.ready = false
	k.mu.Unlock()
}

// load gives every session in the namespace a full TTL from now (the old
// leader's deadlines are unknown, so none may expire earlier than a TTL
// after its last possible keepalive), plus the reconnect grace, and
// starts serving.
func (k *Keeper) load() error {
	term := k.leader.Term()
	restores := k.store.Restores()
	all, err := k.store.Sessions()
	if err != nil {
		return err
	}
	ttls := make(map[uint64]time.Duration, len(all))
	identity := make(map[uint64]string, len(all))
	count := map[string]int{}
	for _, si := range all {
		ttls[si.ID] = time.Duration(si.TTLMillis) * time.Millisecond
		key := QuotaKey(si.Identity, si.Host)
		identity[si.ID] = key
		count[key]++
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	grace := reconnectGrace(len(all), k.cfg.HandshakeRate, k.cfg.MaxReconnectGrace)
	k.table.ResetAll(ttls, grace)
	k.identity, k.count = identity, count
	k.ready, k.term, k.restores, k.loadedAt = true, term, restores, k.clock.Now()
	k.log.Info("sessions loaded", "sessions", len(all), "term", term, "reconnect_grace", grace)
	return nil
}

// reap commits the expiry of every session past its deadline, in batches
// of ExpiryBatch. It returns false when this member can no longer propose
// (it lost leadership or is stopping).
func (k *Keeper) reap(ctx context.Context) bool {
	cutoff, may := k.expiryCutoff()
	if !may {
		return true
	}
	for {
		ids := k.table.ExpiredBy(k.cfg.ExpiryBatch, cutoff)
		if len(ids) == 0 {
			return true
		}
		pctx, cancel := context.WithTimeout(ctx, k.cfg.ApplyTimeout)
		res, err := k.prop.Propose(pctx, &namespace.Command{Op: namespace.OpSessionExpire, Sessions: ids})
		cancel()
		if err == nil && res.Err != nil {
			err = res.Err
		}
		if err != nil {
			// Not committed, or perhaps committed: either way the ids go
			// back, and expiring one that is already gone is harmless.
			k.table.Requeue(ids)
			if k.prop.Deposed(err) {
				return false
			}
			k.log.Warn("session expiry not committed; retrying", "sessions", len(ids), "err", err)
			select {
			case <-ctx.Done():
				return false
			case <-time.After(k.cfg.ExpiryTick):
			}
			continue
		}
		for _, id := range ids {
			k.gone(id) // also for sessions that were gone already
		}
		k.log.Debug("sessions expired", "sessions", len(ids), "rev", res.Index)
	}
}
