package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/latch-io/latch/server/proc"
)

// FaultKind names one kind of fault.
type FaultKind string

// Fault kinds. Member faults are healed (a killed member restarted, a
// paused one continued, a partition healed) before the next fault starts.
const (
	FaultWorkerKill    FaultKind = "worker-kill"      // SIGKILL a worker; a new worker takes its place
	FaultWorkerPause   FaultKind = "worker-pause"     // SIGSTOP a worker for longer than the session TTL (a GC pause)
	FaultLeaderKill    FaultKind = "leader-kill"      // SIGKILL the raft leader, then restart it
	FaultLeaderPause   FaultKind = "leader-pause"     // SIGSTOP the raft leader, then SIGCONT
	FaultFollowerKill  FaultKind = "follower-kill"    // SIGKILL a follower, then restart it
	FaultFollowerPause FaultKind = "follower-pause"   // SIGSTOP a follower, then SIGCONT
	FaultIsolateLeader FaultKind = "partition-leader" // cut the leader off from every other member
	FaultSplit         FaultKind = "partition-split"  // a random minority against the majority
	FaultFlap          FaultKind = "partition-flap"   // random splits and heals in quick succession
)

// FaultKinds lists every fault kind.
var FaultKinds = []FaultKind{
	FaultWorkerKill, FaultWorkerPause, FaultLeaderKill, FaultLeaderPause, FaultFollowerKill,
	FaultFollowerPause, FaultIsolateLeader, FaultSplit, FaultFlap,
}

// Describe says in a few words what the fault does.
func (k FaultKind) Describe() string {
	switch k {
	case FaultWorkerKill:
		return "SIGKILL a worker; a new worker takes its place"
	case FaultWorkerPause:
		return "SIGSTOP a worker for longer than the session TTL (a GC pause), then SIGCONT"
	case FaultLeaderKill:
		return "SIGKILL the raft leader, then restart it"
	case FaultLeaderPause:
		return "SIGSTOP the raft leader, then SIGCONT"
	case FaultFollowerKill:
		return "SIGKILL a follower, then restart it"
	case FaultFollowerPause:
		return "SIGSTOP a follower, then SIGCONT"
	case FaultIsolateLeader:
		return "cut the leader's raft traffic to every other member, then heal"
	case FaultSplit:
		return "cut a random minority off from the majority, then heal"
	case FaultFlap:
		return "random splits and heals in quick succession"
	}
	return "unknown fault"
}

// schedule hands out faults in rounds: each round is every enabled kind
// once, in an order drawn from the seed, so every kind fires once per
// round and a run is reproducible.
type schedule struct {
	kinds []FaultKind
	rng   *rand.Rand
	queue []FaultKind
}

func newSchedule(kinds []FaultKind, rng *rand.Rand) *schedule {
	return &schedule{kinds: slices.Clone(kinds), rng: rng}
}

// next returns the next fault kind; ok is false when none is enabled.
func (s *schedule) next() (FaultKind, bool) {
	if len(s.kinds) == 0 {
		return "", false
	}
	if len(s.queue) == 0 {
		s.queue = slices.Clone(s.kinds)
		s.rng.Shuffle(len(s.queue), func(i, j int) { s.queue[i], s.queue[j] = s.queue[j], s.queue[i] })
	}
	k := s.queue[0]
	s.queue = s.queue[1:]
	return k, true
}

// faultLog appends FaultRecords to faults.jsonl and counts them.
type faultLog struct {
	mu     sync.Mutex
	f      *os.File
	counts map[FaultKind]int
	logf   func(format string, a ...any)
}

func openFaultLog(path string, logf func(string, ...any)) (*faultLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &faultLog{f: f, counts: map[FaultKind]int{}, logf: logf}, nil
}

func (l *faultLog) record(kind FaultKind, phase string, target []string, detail string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if phase == "start" {
		l.counts[kind]++
	}
	appendLine(l.f, FaultRecord{Time: time.Now().UnixNano(), Kind: kind, Phase: phase, Target: target, Detail: detail})
	l.logf("fault %s %s %v %s", kind, phase, target, detail)
}

func (l *faultLog) close() error { return l.f.Close() }

// holdFor is how long a member fault lasts: long enough for an election
// (several election timeouts), short enough to keep sessions alive
// across it.
func (r *run) holdFor() time.Duration {
	return min(max(r.cfg.FaultInterval/2, 4*electionTimeout), r.cfg.SessionTTL)
}

// inject runs one fault from start to heal, then waits until the cluster
// is stable again. A cluster that does not recover is a violation.
func (r *run) inject(ctx context.Context, kind FaultKind) error {
	c := r.cluster
	switch kind {
	case FaultWorkerKill:
		return r.workers.killOne(ctx, r.rng, r.faults)
	case FaultWorkerPause:
		return r.workers.pauseOne(ctx, r.rng, r.cfg.SessionTTL+r.cfg.SessionTTL/2+500*time.Millisecond,
			r.cfg.InjectBug == BugUseAfterLost, r.faults)
	}
	leader, err := c.AwaitLeader(proc.Settled, recoverTimeout)
	if err != nil {
		r.unavailable(kind, "before the fault", err)
		return nil
	}
	n := len(c.Nodes)
	follower := (leader + 1 + r.rng.IntN(n-1)) % n
	ids := func(is ...int) []string {
		var out []string
		for _, i := range is {
			out = append(out, c.Nodes[i].ID)
		}
		return out
	}
	hold := r.holdFor()
	switch kind {
	case FaultLeaderKill, FaultFollowerKill:
		i := leader
		if kind == FaultFollowerKill {
			i = follower
		}
		r.faults.record(kind, "start", ids(i), "SIGKILL")
		if err := c.Kill(i); err != nil {
			return err
		}
		sleepCtx(ctx, hold)
		err := c.Relaunch(i)
		r.faults.record(kind, "end", ids(i), "restarted")
		if err != nil {
			return err
		}
	case FaultLeaderPause, FaultFollowerPause:
		i := leader
		if kind == FaultFollowerPause {
			i = follower
		}
		r.faults.record(kind, "start", ids(i), "SIGSTOP")
		if err := c.Nodes[i].Signal(syscall.SIGSTOP); err != nil {
			return err
		}
		sleepCtx(ctx, hold)
		err := c.Nodes[i].Signal(syscall.SIGCONT)
		r.faults.record(kind, "end", ids(i), "SIGCONT")
		if err != nil {
			return err
		}
	case FaultIsolateLeader, FaultSplit:
		var minority []int
		if kind == FaultIsolateLeader {
			minority = []int{leader}
		} else {
			minority = r.rng.Perm(n)[:(n-1)/2]
		}
		majority := complement(n, minority)
		r.faults.record(kind, "start", ids(minority...), fmt.Sprintf("cut off from %v", ids(majority...)))
		if err := c.Partition(minority, majority); err != nil {
			return err
		}
		sleepCtx(ctx, hold)
		err := c.Heal()
		r.faults.record(kind, "end", ids(minority...), "healed")
		if err != nil {
			return err
		}
	case FaultFlap:
		r.faults.record(kind, "start", nil, "")
		end := time.Now().Add(2 * hold)
		flips := 0
		for time.Now().Before(end) && ctx.Err() == nil {
			side := r.rng.Perm(n)[:1+r.rng.IntN((n-1)/2)]
			if err := c.Partition(side, complement(n, side)); err != nil {
				return err
			}
			sleepCtx(ctx, time.Duration(150+r.rng.IntN(350))*time.Millisecond)
			if err := c.Heal(); err != nil {
				return err
			}
			sleepCtx(ctx, time.Duration(100+r.rng.IntN(300))*time.Millisecond)
			flips++
		}
		r.faults.record(kind, "end", nil, fmt.Sprintf("%d splits, healed", flips))
	default:
		return fmt.Errorf("%w: fault %q", ErrBadConfig, kind)
	}
	if _, err := c.AwaitLeader(proc.Settled, recoverTimeout); err != nil {
		r.unavailable(kind, "after healing", err)
	}
	return nil
}

func complement(n int, side []int) []int {
	var out []int
	for i := 0; i < n; i++ {
		if !slices.Contains(side, i) {
			out = append(out, i)
		}
	}
	return out
}

// sleepCtx sleeps for d or until ctx ends. The runner's pauses are part
// of the fault schedule, not waits for a condition.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
