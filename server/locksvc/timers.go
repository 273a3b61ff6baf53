package locksvc

// The leader's lock clock: while this member is the ready leader it
// proposes a tick (OpNoop stamped with its clock) whenever the namespace's
// NextTimer is due, so lock-delays end and hold TTLs expire through the log
// (doc.go has the whole design).

import (
	"context"
	"time"

	"github.com/latch-io/latch/namespace"
)

// RunTimers proposes the namespace's lock ticks while this member is the
// ready leader, until stop.
func (l *Service) RunTimers(stop <-chan struct{}) {
	l.p.Leader.Follow(stop, l.tickWhileLeader)
}

// tickWhileLeader proposes a tick whenever NextTimer is due. It returns
// whether this member leads again (a new term) when it stops.
func (l *Service) tickWhileLeader(stop <-chan struct{}, sub <-chan bool) bool {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	burst := 0
	for {
		next, ok := l.p.Store.NextTimer()
		now := l.p.Clock.Now()
		wait := l.cfg.ExpiryTick
		if ok && next <= now && burst < tickBurst {
			burst++
			err := l.tick()
			if err == nil {
				continue
			}
			if l.p.Proposer.Deposed(err) {
				return l.p.Leader.IsLeader()
			}
			l.p.Log.Warn("lock tick not committed; retrying", "err", err)
		} else {
			if burst >= tickBurst {
				l.p.Log.Warn("lock ticks keep coming due; pausing", "ticks", burst)
			}
			burst = 0
			if ok {
				// A Clock that is not the wall clock (tests) is re-read at
				// least every ExpiryTick.
				wait = min(max(time.Duration(next-now), 0), wait)
			}
		}
		timer.Reset(wait)
		select {
		case <-stop:
			return false
		case leader := <-sub:
			return leader
		case <-l.wake:
		case <-timer.C:
		}
	}
}

// tick commits one OpNoop stamped with this leader's clock: it fires the
// lock timers due by then and grants what they free.
func (l *Service) tick() error {
	ctx, cancel := context.WithTimeout(l.p.Proposer.Context(), l.cfg.ApplyTimeout)
	defer cancel()
	res, err := l.p.Proposer.Propose(ctx, &namespace.Command{Op: namespace.OpNoop})
	if err != nil {
		return err
	}
	return res.Err
}
