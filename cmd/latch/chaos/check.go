package chaos

import (
	"fmt"
	"slices"
	"time"
)

// Checker names, in report order.
const (
	CheckMutualExclusion = "mutual-exclusion"
	CheckLinearizable    = "linearizability"
	CheckLostWrites      = "no-lost-writes"
	CheckSessions        = "sessions"
	CheckElection        = "election"
	// CheckRecovery is judged by the orchestrator during the run: after
	// every fault healed, the cluster elected a ready leader again.
	CheckRecovery = "recovery"
)

// Named violations. A failed run names each violation it found with one
// of these.
const (
	// Mutual exclusion (fencedstore history and lock holders).
	ViolationFencingOrder       = "fencing-order"       // an accepted write's token below an earlier accepted write's
	ViolationLostUpdate         = "lost-update"         // an accepted counter write not exactly one above the previous
	ViolationOverlappingHolders = "overlapping-holders" // two clients' accepted read-modify-writes interleaved while both believed they held the lock
	ViolationUseAfterLost       = "use-after-lost"      // a worker used a lock's token after its Lost() fired
	// kv.
	ViolationNotLinearizable = "not-linearizable" // porcupine found no linearization of a key's history
	ViolationLostWrite       = "lost-write"       // the final value of a key is none of the acknowledged last writes
	// Sessions.
	ViolationSessionNotExpired = "session-not-expired"   // a killed worker's session outlived the bound
	ViolationSessionExpired    = "session-expired-early" // a session expired while its worker was alive, running and connected
	// Election.
	ViolationTwoLeaders  = "two-leaders-in-term" // two campaigners won the same term
	ViolationTermOrder   = "term-not-increasing" // a later election won a term not above an earlier one
	ViolationUnavailable = "cluster-unavailable" // the cluster did not recover after a fault healed
)

// Verdict statuses.
const (
	StatusPass    = "pass"
	StatusFail    = "fail"
	StatusSkipped = "skipped" // the workload did not run, or its data is missing
	StatusUnknown = "unknown" // the checker could not decide (porcupine timed out)
)

// Violation is one broken property, named by a Violation* constant.
type Violation struct {
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

// Verdict is one checker's judgement.
type Verdict struct {
	Checker    string      `json:"checker"`
	Status     string      `json:"status"`
	Summary    string      `json:"summary"`
	Violations []Violation `json:"violations,omitempty"`
}

// verdict builds a Verdict: fail when there are violations.
func verdict(name, summary string, vs []Violation) Verdict {
	v := Verdict{Checker: name, Status: StatusPass, Summary: summary, Violations: vs}
	if len(vs) > 0 {
		v.Status = StatusFail
	}
	return v
}

func skipped(name, why string) Verdict {
	return Verdict{Checker: name, Status: StatusSkipped, Summary: why}
}

// CheckOptions tune the checkers.
type CheckOptions struct {
	// PorcupineTimeout bounds the linearizability search per run; 0: 1m.
	PorcupineTimeout time.Duration
	// VisualizePath, when set, receives porcupine's HTML visualization if
	// the kv history is not linearizable.
	VisualizePath string
}

// Check runs every checker on ev.
func Check(ev *Evidence, opts CheckOptions) []Verdict {
	if opts.PorcupineTimeout == 0 {
		opts.PorcupineTimeout = time.Minute
	}
	has := func(w string) bool { return len(ev.Params.Workloads) == 0 || slices.Contains(ev.Params.Workloads, w) }
	var out []Verdict
	if has(WorkloadLocks) || has(WorkloadElection) {
		out = append(out, checkMutualExclusion(ev))
	} else {
		out = append(out, skipped(CheckMutualExclusion, "no locks or election workload"))
	}
	if has(WorkloadKV) {
		out = append(out, checkLinearizable(ev, opts), checkLostWrites(ev))
	} else {
		out = append(out, skipped(CheckLinearizable, "no kv workload"), skipped(CheckLostWrites, "no kv workload"))
	}
	out = append(out, checkSessions(ev))
	if has(WorkloadElection) {
		out = append(out, checkElection(ev))
	} else {
		out = append(out, skipped(CheckElection, "no election workload"))
	}
	if ev.Params.Rogue {
		out = append(out, checkRogue(ev))
	} else {
		out = append(out, skipped(CheckAuthorization, "no rogue worker"))
	}
	return out
}

// Violations collects every violation of verdicts.
func Violations(verdicts []Verdict) []Violation {
	var out []Violation
	for _, v := range verdicts {
		out = append(out, v.Violations...)
	}
	return out
}

func nanos(t int64) string {
	if t == 0 {
		return "never"
	}
	return time.Unix(0, t).Format("15:04:05.000")
}

func since(from, to int64) time.Duration { return time.Duration(to - from) }

func describeOp(o *Op) string {
	s := fmt.Sprintf("%s#%d %s", o.Worker, o.ID, o.Op)
	if o.Args.Key != "" {
		s += " " + o.Args.Key
	}
	if o.Token != 0 {
		s += fmt.Sprintf(" token %d", o.Token)
	}
	return s + " at " + nanos(o.Invoke)
}
