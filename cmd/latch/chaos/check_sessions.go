package chaos

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Session bounds. A killed worker's last keepalive was sent at the latest
// when it was killed, so the leader may expire its session TTL later; the
// reaper runs on the leader's timer and commits the expiry through raft
// (reaperSlack), and the poll sees it within a poll interval. The brief
// adds the lock-delay: a dead holder's lock is next granted that much
// later, and the runner treats "expired" as "its locks are free again".
// When a member fault was active meanwhile, a new leader may have given
// every session a fresh full TTL (DESIGN.md, Sessions) after an election:
// failoverSlack covers that.
const reaperSlack = time.Second

// expiryBound is how long after a kill the session of a killed worker may
// still be listed.
func expiryBound(p Params, failover bool) time.Duration {
	b := p.SessionTTL + p.SessionTTL/3 + p.LockDelay + p.PollInterval + reaperSlack
	if failover {
		b += failoverSlack(p)
	}
	return b
}

// failoverSlack is the extra time a leader change may add: an election
// (a few election timeouts) and a fresh full TTL.
func failoverSlack(p Params) time.Duration {
	return p.SessionTTL + 4*p.ElectionTimeout + time.Second
}

// memberFaultWindows returns the spans during which a fault that can move
// leadership (any member or partition fault) was active, widened by a
// recovery margin.
func memberFaultWindows(faults []FaultRecord, margin time.Duration) []Interval {
	var out []Interval
	open := map[FaultKind]int64{}
	for _, f := range faults {
		if strings.HasPrefix(string(f.Kind), "worker-") {
			continue
		}
		switch f.Phase {
		case "start":
			open[f.Kind] = f.Time
		case "end":
			if s, ok := open[f.Kind]; ok {
				out = append(out, Interval{s, f.Time + int64(margin)})
				delete(open, f.Kind)
			}
		}
	}
	for _, s := range open {
		out = append(out, Interval{s, 1<<63 - 1})
	}
	return out
}

func overlaps(ws []Interval, from, to int64) bool {
	for _, w := range ws {
		if w.Start <= to && w.End >= from {
			return true
		}
	}
	return false
}

// workerSession is what a worker's history says about its session.
type workerSession struct {
	worker   *WorkerInfo
	id       uint64
	closed   int64   // invoke of session-close; 0 if never
	jeopardy []int64 // times of jeopardy events
	expired  int64   // time of the worker seeing it expire; 0 if never
}

// connectedThroughout reports whether the worker ran unpaused and saw no
// jeopardy in [from, to].
func (s *workerSession) connectedThroughout(from, to int64) bool {
	if s.worker.pausedDuring(from, to) {
		return false
	}
	for _, j := range s.jeopardy {
		if j >= from && j <= to {
			return false
		}
	}
	return true
}

func workerSessions(ev *Evidence) []*workerSession {
	byID := map[uint64]*workerSession{}
	var out []*workerSession
	for i := range ev.Ops {
		o := &ev.Ops[i]
		w := ev.worker(o.Worker)
		if w == nil || o.Session == 0 {
			continue
		}
		s := byID[o.Session]
		if s == nil {
			if o.Op != OpSessionOpen || o.Outcome != OutcomeOK {
				continue
			}
			s = &workerSession{worker: w, id: o.Session}
			byID[o.Session] = s
			out = append(out, s)
			continue
		}
		switch o.Op {
		case OpSessionClose:
			if s.closed == 0 {
				s.closed = o.Invoke
			}
		case EvSessionState:
			switch o.Result.State {
			case "jeopardy":
				s.jeopardy = append(s.jeopardy, o.Invoke)
			case "expired":
				if s.expired == 0 {
					s.expired = o.Invoke
				}
			}
		}
	}
	return out
}

// checkSessions checks, from the orchestrator's polls of the session list
// and the workers' own records:
//
//   - session-not-expired: the session of a killed worker is gone within
//     expiryBound of the kill;
//   - session-expired-early: no session ends (vanishes from the list, or
//     its worker sees it expire) while its worker was alive, not paused
//     and not in jeopardy during the TTL before.
func checkSessions(ev *Evidence) Verdict {
	p := ev.Params
	sessions := workerSessions(ev)
	if len(sessions) == 0 {
		return skipped(CheckSessions, "no worker sessions recorded")
	}
	windows := memberFaultWindows(ev.Faults, failoverSlack(p))
	lookback := int64(p.SessionTTL + p.SessionTTL/3 + reaperSlack)

	var vs []Violation
	killedExpired, expired, pending := 0, 0, 0
	var worst time.Duration
	for _, s := range sessions {
		w := s.worker
		lastSeen, gone := seenThenGone(ev.Sessions, s.id)
		seen := lastSeen != 0
		if w.Killed != 0 && (s.closed == 0 || s.closed > w.Killed) {
			failover := overlaps(windows, w.Killed, w.Killed+int64(expiryBound(p, false)))
			bound := expiryBound(p, failover)
			switch {
			case gone != 0 && gone > w.Killed:
				killedExpired++
				worst = max(worst, since(w.Killed, lastSeen))
				if since(w.Killed, lastSeen) > bound {
					vs = append(vs, Violation{ViolationSessionNotExpired, fmt.Sprintf(
						"session %d of %s (killed %s) was still listed %v after the kill; bound %v",
						s.id, w.ID, nanos(w.Killed), since(w.Killed, lastSeen).Round(time.Millisecond), bound)})
				}
			case seen && lastSeen > w.Killed && since(w.Killed, lastSeen) > bound:
				vs = append(vs, Violation{ViolationSessionNotExpired, fmt.Sprintf(
					"session %d of %s (killed %s) was still listed at the last poll, %v after the kill; bound %v",
					s.id, w.ID, nanos(w.Killed), since(w.Killed, lastSeen).Round(time.Millisecond), bound)})
			default:
				pending++ // the run ended before the bound passed
			}
			continue
		}
		if gone != 0 && (s.closed == 0 || s.closed > gone) && (w.Exited == 0 || w.Exited > gone) {
			expired++
			if s.connectedThroughout(lastSeen-lookback, gone) {
				vs = append(vs, Violation{ViolationSessionExpired, fmt.Sprintf(
					"session %d of %s vanished between %s and %s while its worker ran, unpaused and connected",
					s.id, w.ID, nanos(lastSeen), nanos(gone))})
				continue
			}
		}
		if s.expired != 0 && (s.closed == 0 || s.closed > s.expired) && s.connectedThroughout(s.expired-lookback, s.expired) {
			vs = append(vs, Violation{ViolationSessionExpired, fmt.Sprintf(
				"%s saw session %d expire at %s while it ran, unpaused and connected",
				w.ID, s.id, nanos(s.expired))})
		}
	}
	summary := fmt.Sprintf("%d worker sessions; %d of killed workers expired (slowest seen %v after the kill; bound %v, %v with failover), %d others expired",
		len(sessions), killedExpired, worst.Round(time.Millisecond), expiryBound(p, false), expiryBound(p, true), expired)
	if pending > 0 {
		summary += fmt.Sprintf(", %d undecided at the end of the run", pending)
	}
	return verdict(CheckSessions, summary, vs)
}

// seenThenGone returns the time of the last poll that listed session id
// before the first poll that no longer did (gone); lastSeen is 0 when no
// poll listed it, gone 0 when it was listed until the end.
func seenThenGone(polls []SessionPoll, id uint64) (lastSeen, gone int64) {
	for _, poll := range polls {
		if slices.Contains(poll.IDs, id) {
			lastSeen = poll.Time
			continue
		}
		if lastSeen != 0 {
			return lastSeen, poll.Time
		}
	}
	return lastSeen, 0
}
