package chaos

import (
	"cmp"
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
// A leader change gives every session a fresh full TTL (DESIGN.md,
// Sessions) once the new leader is elected: after a fault that can move
// leadership, the bound starts again at the fault's end plus an election
// (electionSlack).
const reaperSlack = time.Second

// expiryBound is how long after its last chance of renewal (the kill, or
// the last leader change) a session may still be listed.
func expiryBound(p Params) time.Duration {
	return p.SessionTTL + p.SessionTTL/3 + p.LockDelay + p.PollInterval + reaperSlack
}

// electionSlack is how long after a fault ends a new leader may take to
// be elected and reset the leases: a few election timeouts.
func electionSlack(p Params) time.Duration {
	return 4*p.ElectionTimeout + time.Second
}

// expiryDeadline is the latest time the session of a worker killed at
// killed may still be listed: expiryBound after the kill, or after the
// end (plus an election) of the last leader-moving fault that began before
// that deadline.
func expiryDeadline(p Params, killed int64, windows []Interval) int64 {
	deadline := killed + int64(expiryBound(p))
	for _, w := range windows { // in start order
		if w.Start <= deadline {
			deadline = max(deadline, w.End+int64(electionSlack(p)+expiryBound(p)))
		}
	}
	return deadline
}

// memberFaultWindows returns, in start order, the spans during which a
// fault that can move leadership (any member or partition fault) was
// active; one still open at the end of the log lasts forever.
func memberFaultWindows(faults []FaultRecord) []Interval {
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
				out = append(out, Interval{s, f.Time})
				delete(open, f.Kind)
			}
		}
	}
	for _, s := range open {
		out = append(out, Interval{s, 1<<62 - 1})
	}
	slices.SortFunc(out, func(a, b Interval) int { return cmp.Compare(a.Start, b.Start) })
	return out
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
	windows := memberFaultWindows(ev.Faults)
	lookback := int64(p.SessionTTL + p.SessionTTL/3 + reaperSlack)

	var vs []Violation
	killedExpired, expired, pending := 0, 0, 0
	var worst time.Duration
	for _, s := range sessions {
		w := s.worker
		lastSeen, gone := seenThenGone(ev.Sessions, s.id)
		seen := lastSeen != 0
		if w.Killed != 0 && (s.closed == 0 || s.closed > w.Killed) {
			deadline := expiryDeadline(p, w.Killed, windows)
			switch {
			case seen && lastSeen > deadline:
				where := "was still listed at the last poll"
				if gone != 0 {
					where = "was still listed"
				}
				vs = append(vs, Violation{ViolationSessionNotExpired, fmt.Sprintf(
					"session %d of %s (killed %s) %s %v after the kill; allowed %v",
					s.id, w.ID, nanos(w.Killed), where, since(w.Killed, lastSeen).Round(time.Millisecond),
					since(w.Killed, deadline).Round(time.Millisecond))})
			case gone != 0 && gone > w.Killed:
				killedExpired++
				worst = max(worst, since(w.Killed, lastSeen))
			default:
				pending++ // the run ended before the deadline passed
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
	summary := fmt.Sprintf("%d worker sessions; %d of killed workers expired (last seen at most %v after the kill; bound %v, restarted by leader changes), %d others expired",
		len(sessions), killedExpired, worst.Round(time.Millisecond), expiryBound(p), expired)
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
