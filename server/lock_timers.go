package server

// The leader's lock clock: while this member is the ready leader it
// proposes a tick (OpNoop stamped with its clock) whenever the namespace's
// NextTimer is due, so lock-delays end and hold TTLs expire through the log
// (lock.go has the whole design).

import (
	"context"
	"errors"
	"time"

	"github.com/latch-io/latch/namespace"
)

// runTimers proposes the namespace's lock ticks while this member is the
// ready leader, until stop.
func (l *lockService) runTimers(stop <-chan struct{}) {
	l.f.s.followLeadership(stop, l.tickWhileLeader)
}

// tickWhileLeader proposes a tick whenever NextTimer is due. It returns
// whether this member leads again (a new term) when it stops.
func (l *lockService) tickWhileLeader(stop <-chan struct{}, sub <-chan bool) bool {
	s := l.f.s
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	burst := 0
	for {
		next, ok := s.store.NextTimer()
		now := s.clock.Now()
		wait := s.cfg.ExpiryTick
		if ok && next <= now && burst < tickBurst {
			burst++
			err := l.tick()
			if err == nil {
				continue
			}
			var nl *NotLeaderError
			if errors.As(err, &nl) || errors.Is(err, ErrClosed) {
				return s.IsLeader()
			}
			s.log.Warn("lock tick not committed; retrying", "err", err)
		} else {
			if burst >= tickBurst {
				s.log.Warn("lock ticks keep coming due; pausing", "ticks", burst)
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
func (l *lockService) tick() error {
	ctx, cancel := context.WithTimeout(l.f.s.ctx, l.f.s.cfg.ApplyTimeout)
	defer cancel()
	res, err := l.f.s.Propose(ctx, &namespace.Command{Op: namespace.OpNoop})
	if err != nil {
		return err
	}
	return res.Err
}
