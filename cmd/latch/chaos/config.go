package chaos

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Workloads.
const (
	WorkloadLocks    = "locks"
	WorkloadKV       = "kv"
	WorkloadElection = "election"
)

// RoleRogue is the role of the rogue worker (Config.Rogue): not a
// workload the other workers share, one extra worker.
const RoleRogue = "rogue"

// AllWorkloads lists every workload in the order roles are handed out.
var AllWorkloads = []string{WorkloadLocks, WorkloadKV, WorkloadElection}

// Bugs that --inject-bug plants to prove the checkers fail.
const (
	// BugSkipLock: some locks workers never take the lock; they borrow the
	// newest token the store has seen, so the store accepts them.
	BugSkipLock = "skip-lock"
	// BugIgnoreTokens: fencedstore runs with --ignore-tokens and some locks
	// workers write with an older token of theirs.
	BugIgnoreTokens = "ignore-tokens"
	// BugUseAfterLost: some locks workers keep using a lock after Lost()
	// and hold locks long, so a worker pause lands inside a hold.
	BugUseAfterLost = "use-after-lost"
	// BugRogueAdmin: the cluster makes clients without a certificate
	// (the rogue among them) admins, so the rogue's attacks succeed.
	BugRogueAdmin = "rogue-admin"
	// BugMisroute (with Cells 2): the steady cell's client routes the
	// steady cell's paths to the chaos cell's members.
	BugMisroute = "misroute"
)

// Bugs lists every --inject-bug value.
var Bugs = []string{BugSkipLock, BugIgnoreTokens, BugUseAfterLost, BugRogueAdmin, BugMisroute}

// Config configures a chaos run. Start from DefaultConfig.
type Config struct {
	// Members is the cluster size: 3 or 5. Default 3.
	Members int
	// Workers is how many worker processes run at once, handed the
	// workloads in turn. Default 6.
	Workers int
	// Workloads run by the workers (WorkloadLocks, WorkloadKV,
	// WorkloadElection). Default all.
	Workloads []string
	// Faults are the fault kinds the schedule draws from (see FaultKinds);
	// empty means none. Default all.
	Faults []FaultKind
	// Duration is how long workloads run under faults. Default 2m.
	Duration time.Duration
	// Rounds, when positive, ends the run after that many rounds of the
	// fault schedule (each round is every kind in Faults once) instead of
	// after Duration: a deterministic short run that fires every kind.
	Rounds int
	// FaultInterval is the time from one fault's start to the next one's.
	// Faults never overlap: the next starts once the previous one healed
	// and the cluster recovered. Default 4s.
	FaultInterval time.Duration
	// Seed drives every random choice of the orchestrator and the workers.
	// Default 1.
	Seed int64
	// SessionTTL is the workers' session TTL. Default 3s.
	SessionTTL time.Duration
	// LockDelay is asked with every lock request. Default 1s.
	LockDelay time.Duration
	// Out is the directory for histories, logs, the fault log and the
	// report. Required.
	Out string
	// InjectBug plants one of Bugs; "" for none.
	InjectBug string
	// MutualTLS makes the members require client certificates
	// (--tls-client-ca) with ACLs enforced (--acl-default allow: the
	// workers share the dev client identity, and none is an admin); the
	// workers and the orchestrator present the dev client certificate.
	MutualTLS bool
	// Rogue adds a worker with no rights over the others' nodes that keeps
	// trying to delete, overwrite and steal their locks and election
	// nodes (and to lock / and plant reserved names); the run fails if it
	// ever succeeds. Default on.
	Rogue bool
	// LatchdBin and FencedstoreBin are the binaries to run; "" takes the
	// one beside the latch executable, else builds it into Out/bin inside a
	// latch source checkout, else the one on PATH.
	LatchdBin, FencedstoreBin string
	// WorkerCommand is the command line prefix that starts a worker; the
	// worker flags follow it. Default: this executable, "chaos-worker".
	WorkerCommand []string
	// WorkerEnv is added to the workers' environment.
	WorkerEnv []string
	// Cells, when 2, runs two cells: the faults, workers and checkers
	// above hit cell CellChaos (its members run --cell chaos; the
	// workloads live under /chaos), while a second cell of Members
	// members, CellSteady, takes no fault and serves a writer through a
	// cell-routing client the whole time; the cells checker fails the run
	// when one of its operations fails or reads back a wrong value, or
	// when its data is found in the wrong cell. 0 or 1: one cluster, as
	// before.
	Cells int
	// Verbose logs every fault and worker start to Log.
	Verbose bool
	// Log receives progress lines; nil discards.
	Log io.Writer
	// Logger receives structured logs of the orchestrator's client; nil
	// discards.
	Logger *slog.Logger
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig() Config {
	return Config{
		Members:       3,
		Workers:       6,
		Workloads:     slices.Clone(AllWorkloads),
		Faults:        slices.Clone(FaultKinds),
		Duration:      2 * time.Minute,
		FaultInterval: 4 * time.Second,
		Seed:          1,
		SessionTTL:    3 * time.Second,
		LockDelay:     time.Second,
		Rogue:         true,
	}
}

// Validate returns an error naming the first bad field, wrapping
// ErrBadConfig.
func (c *Config) Validate() error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrBadConfig, field, fmt.Sprintf(format, a...))
	}
	switch {
	case c.Members != 3 && c.Members != 5:
		return bad("Members", "%d: want 3 or 5", c.Members)
	case c.Workers < 1 || c.Workers > 64:
		return bad("Workers", "%d: want 1..64", c.Workers)
	case len(c.Workloads) == 0:
		return bad("Workloads", "at least one of %s", strings.Join(AllWorkloads, ", "))
	case c.Duration <= 0 && c.Rounds <= 0:
		return bad("Duration", "%v must be positive", c.Duration)
	case c.Rounds > 0 && len(c.Faults) == 0:
		return bad("Rounds", "%d rounds of no faults", c.Rounds)
	case c.FaultInterval < 500*time.Millisecond:
		return bad("FaultInterval", "%v is below 500ms", c.FaultInterval)
	case c.SessionTTL < time.Second:
		return bad("SessionTTL", "%v is below 1s", c.SessionTTL)
	case c.LockDelay < 0:
		return bad("LockDelay", "%v is negative", c.LockDelay)
	case c.Out == "":
		return bad("Out", "required")
	}
	for _, w := range c.Workloads {
		if !slices.Contains(AllWorkloads, w) {
			return bad("Workloads", "unknown workload %q (want %s)", w, strings.Join(AllWorkloads, ", "))
		}
	}
	if c.Workers < len(c.Workloads) {
		return bad("Workers", "%d cannot run %d workloads", c.Workers, len(c.Workloads))
	}
	for _, f := range c.Faults {
		if !slices.Contains(FaultKinds, f) {
			return bad("Faults", "unknown fault %q", f)
		}
	}
	if c.Cells < 0 || c.Cells > 2 {
		return bad("Cells", "%d: want 1 or 2", c.Cells)
	}
	if c.InjectBug != "" {
		if !slices.Contains(Bugs, c.InjectBug) {
			return bad("InjectBug", "unknown bug %q (want %s)", c.InjectBug, strings.Join(Bugs, ", "))
		}
		if c.InjectBug == BugMisroute {
			if c.Cells != 2 {
				return bad("InjectBug", "%s needs two cells", c.InjectBug)
			}
			return nil
		}
		if c.InjectBug == BugRogueAdmin {
			if !c.Rogue {
				return bad("InjectBug", "%s needs the rogue worker", c.InjectBug)
			}
			return nil
		}
		if !slices.Contains(c.Workloads, WorkloadLocks) || c.lockWorkers() < 2 {
			return bad("InjectBug", "%s needs the locks workload with at least 2 workers", c.InjectBug)
		}
		if c.InjectBug == BugUseAfterLost && !slices.Contains(c.Faults, FaultWorkerPause) {
			return bad("InjectBug", "%s needs the %s fault to make a worker lose its lock", c.InjectBug, FaultWorkerPause)
		}
	}
	return nil
}

// roleOf is the workload of worker slot i: the workloads in turn.
func (c *Config) roleOf(slot int) string { return c.Workloads[slot%len(c.Workloads)] }

func (c *Config) lockWorkers() int {
	n := 0
	for i := 0; i < c.Workers; i++ {
		if c.roleOf(i) == WorkloadLocks {
			n++
		}
	}
	return n
}

// buggy reports whether the worker in slot i runs the injected bug: every
// other locks worker, starting with the first, so correct workers remain
// to collide with.
func (c *Config) buggy(slot int) bool {
	if c.InjectBug == "" || c.InjectBug == BugRogueAdmin || c.roleOf(slot) != WorkloadLocks {
		return false
	}
	n := 0
	for i := 0; i < slot; i++ {
		if c.roleOf(i) == WorkloadLocks {
			n++
		}
	}
	return n%2 == 0
}

// ParseList splits a comma-separated flag value, dropping empty items.
func ParseList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// ParseFaults parses a --faults value: "all", "none", or a list of fault
// kinds.
func ParseFaults(s string) ([]FaultKind, error) {
	switch strings.TrimSpace(s) {
	case "all", "":
		return slices.Clone(FaultKinds), nil
	case "none":
		return nil, nil
	}
	var out []FaultKind
	for _, p := range ParseList(s) {
		k := FaultKind(p)
		if !slices.Contains(FaultKinds, k) {
			return nil, fmt.Errorf("%w: --faults: unknown fault %q", ErrBadConfig, p)
		}
		out = append(out, k)
	}
	return out, nil
}
