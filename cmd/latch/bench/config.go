package bench

import (
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/latch-io/latch/client"
)

// Scenarios.
const (
	// ScenarioGet: linearizable Get of one node (confirmed by the leader).
	ScenarioGet = "get"
	// ScenarioStaleGet: Get with client.Stale() (served without a
	// leadership check by the member the client is connected to).
	ScenarioStaleGet = "stale-get"
	// ScenarioCreate: Create of persistent nodes with DataSize bytes.
	ScenarioCreate = "create"
	// ScenarioSet: Set of an existing node of DataSize bytes, each
	// goroutine its own node: one commit per operation.
	ScenarioSet = "set"
	// ScenarioWatch: one writer sets a node while a watcher on another
	// connection waits for each change: put → event latency.
	ScenarioWatch = "watch"
	// ScenarioLock: uncontended Mutex Lock then Unlock.
	ScenarioLock = "lock"
	// ScenarioContended: Concurrency sessions cycling Lock/Unlock on
	// Locks locks for Duration.
	ScenarioContended = "contended"
	// ScenarioCachedGet: Get with client.Cached() (answered by the client
	// cache, no round trip).
	ScenarioCachedGet = "cached-get"
	// ScenarioCachedSet: Set of one node cached by Cachers connections:
	// what invalidating them costs a write.
	ScenarioCachedSet = "cached-set"
	// ScenarioSessions: Sessions sessions opened, held for Window, closed,
	// with the leader's CPU and memory measured.
	ScenarioSessions = "sessions"
	// ScenarioStorm: Sessions sessions, one connection and full handshake
	// each, opened at once and held; then optionally the leader killed or
	// stopped (Kill) and a handshake flood (Flood): leader changes, lost
	// sessions, reconnect times.
	ScenarioStorm = "storm"
)

// Config.ReadFrom values.
const (
	// ReadSpread: connection i reads from endpoint i mod len(endpoints)
	// first (the next ones if it does not answer), so the reads of many
	// connections spread evenly over every member listed, leader,
	// followers and learners alike.
	ReadSpread = "spread"
	// ReadNearest: the client's own choice (no ReadEndpoints): the member
	// that is not the leader and answers a probe fastest.
	ReadNearest = "nearest"
	// ReadLeader: every Stale read goes to the leader
	// (client.Config.LeaderReads).
	ReadLeader = "leader"
	// ReadFollowers: as ReadSpread, over the members that are not the
	// leader (followers and learners, from the member list): the leader
	// answers none of the stale reads.
	ReadFollowers = "followers"
	// ReadLearners: as ReadSpread, over the learners only (non-voters):
	// what members that take no part in commits add.
	ReadLearners = "learners"
)

// readFroms lists the ReadFrom values, in the order the help shows them.
var readFroms = []string{ReadSpread, ReadNearest, ReadLeader, ReadFollowers, ReadLearners}

// Scenarios lists every scenario, in the order the help shows them.
var Scenarios = []string{ScenarioGet, ScenarioStaleGet, ScenarioCachedGet, ScenarioCreate, ScenarioSet, ScenarioCachedSet, ScenarioWatch, ScenarioLock, ScenarioContended, ScenarioSessions, ScenarioStorm}

// Defaults of Config (see the fields).
const (
	DefaultOps              = 2000
	DefaultContendedClients = 64
	DefaultLocks            = 8
	DefaultDuration         = 10 * time.Second
	DefaultSessions         = 5000
	DefaultWindow           = 30 * time.Second
	DefaultOpeners          = 64
	DefaultDataSize         = 100
	DefaultMaxTime          = 10 * time.Minute
	DefaultOpTimeout        = 10 * time.Second
	DefaultObserve          = 30 * time.Second
	defaultContendedConns   = 4
)

// Config configures one benchmark run. Zero fields take the defaults
// documented on them, which depend on the scenario.
type Config struct {
	// Scenario is one of Scenarios.
	Scenario string
	// Client configures every connection the run makes (endpoints, TLS,
	// SessionTTL: the TTL of every session the run opens).
	Client client.Config

	// Ops is how many operations get, stale-get, create and lock run (for
	// lock: Lock+Unlock cycles). Default DefaultOps.
	Ops int
	// Concurrency is how many goroutines issue operations (get, stale-get,
	// create, lock; default 1), how many clients contend (contended,
	// default DefaultContendedClients, each its own session) or how many
	// sessions are being opened at once (sessions, default
	// DefaultOpeners).
	Concurrency int
	// Conns is how many client connections the run spreads its goroutines
	// or sessions over, round robin. Default 1, except contended (4).
	// For sessions, Conns = Sessions gives every session its own
	// connection.
	Conns int
	// Locks is how many locks contended spreads its clients over (client i
	// always takes lock i mod Locks, or a random one with RandomLock).
	// Default DefaultLocks.
	Locks int
	// RandomLock makes every contended client pick a lock at random for
	// each cycle instead of always the same one.
	RandomLock bool
	// Duration is how long contended runs. Default DefaultDuration.
	Duration time.Duration
	// Reference is the cycles/s of a reference contended run (the peak,
	// at the client count that saturates the leader): the report then
	// gives this run's goodput in percent of it. 0: none.
	Reference float64
	// Sessions is how many sessions the sessions scenario opens. Default
	// DefaultSessions.
	Sessions int
	// Cachers is how many connections cache the node cached-set writes
	// (0: none, the baseline). Default 0.
	Cachers int
	// Window is how long the sessions scenario holds its sessions while
	// it measures the leader. Default DefaultWindow.
	Window time.Duration
	// FullHandshakes makes every connection of the sessions scenario a
	// full TLS handshake, as separate processes meeting a member for the
	// first time would make: each client keeps its own session tickets.
	// Off, the connections share Client.TLS's tickets (session.ClientTLS
	// keeps them) and resume the session of an earlier one.
	FullHandshakes bool
	// Kill is what storm does to the leader while its sessions are held:
	// "kill" (SIGKILL), "stop" (SIGSTOP, SIGCONT at the end), "stall"
	// (its raft log writes held through POST /v1/faults/storage: members
	// started with --fault-injection, an admin certificate), "freeze"
	// (fsfreeze of its data dir, which must be a file system of its own:
	// cluster.sh LOOPFS=1; root; fsfreeze -u at the end) or "" (none).
	// For kill, stop and freeze the leader must run on this host (its
	// admin status names its pid).
	Kill string
	// Observe is how long storm watches after Kill before it counts lost
	// sessions and leader changes. Default DefaultObserve.
	Observe time.Duration
	// FloodCommand, when set, runs storm's flood as a process of its own:
	// this command (argv) followed by --flood-target ADDR --duration D
	// flood, which must print FormatFlood's line (the latch CLI sets it to
	// itself). Empty: the flood runs in the measuring process.
	FloodCommand []string
	// Flood makes storm run lock cycles for Flood without, then Flood
	// with, a flood of certificate-less handshakes and leader probes.
	Flood time.Duration
	// Admin is the leader's admin HTTP address (host:port) for sessions.
	// Default: the leader's as the cluster's member list reports it.
	Admin string
	// DataSize is the size of the data of created and read nodes. Default
	// DefaultDataSize; -1 for none.
	DataSize int
	// FreshPath makes lock take a new lock path every cycle instead of
	// the same one.
	FreshPath bool
	// Prefix is the node every node of the run lives under; it must not
	// exist. Default /latch-bench-<random>.
	Prefix string
	// Keep leaves Prefix and its nodes in place after the run instead of
	// deleting them.
	Keep bool
	// OpTimeout bounds each operation, the connection set-up and the
	// clean-up steps. Default DefaultOpTimeout.
	OpTimeout time.Duration
	// MaxTime bounds the whole run: when it passes, the run stops and
	// reports what it measured so far, marked truncated. Default
	// DefaultMaxTime.
	MaxTime time.Duration
	// AllowRemote lets the run talk to non-loopback addresses. Off, every
	// endpoint and Admin must be a loopback address: a benchmark loads
	// the cluster it runs against, so aiming it at a shared one takes a
	// deliberate flag.
	AllowRemote bool
	// LeaderCPU makes set, contended, get, stale-get, cached-get and
	// cached-set scrape the leader's process CPU (its admin /metrics,
	// process_cpu_seconds_total: the kernel's count for the process, as in
	// /proc/PID/stat) before and after the measured phase and report it
	// per operation (contended: per cycle).
	LeaderCPU bool
	// ReadFrom picks the member each connection sends its Stale reads
	// (and watches) to: ReadSpread, ReadNearest, ReadLeader,
	// ReadFollowers, ReadLearners, or "" (Client.ReadEndpoints as given;
	// the CLI gives the endpoints in order: the first that answers).
	ReadFrom string
	// MemberCPU makes get, stale-get and cached-get scrape every member's
	// admin /metrics and /v1/status before and after the measured phase
	// and report, per member, the reads it answered (latch_reads_total),
	// its process CPU and, for a member on this host whose cgroup caps
	// its CPU (cluster.sh CPU=...), that budget and how often it was
	// used up (Report.Members).
	MemberCPU bool
	// Log receives progress lines. Default: discard.
	Log io.Writer
}

// withDefaults fills the zero fields for the scenario.
func (c Config) withDefaults() Config {
	set := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	set(&c.Ops, DefaultOps)
	set(&c.Locks, DefaultLocks)
	set(&c.Sessions, DefaultSessions)
	set(&c.DataSize, DefaultDataSize)
	switch c.Scenario {
	case ScenarioContended:
		set(&c.Concurrency, DefaultContendedClients)
		set(&c.Conns, min(defaultContendedConns, c.Concurrency))
	case ScenarioSessions:
		set(&c.Concurrency, DefaultOpeners)
		set(&c.Conns, 1)
	case ScenarioStorm:
		// The storm is many separate clients: a connection and a full
		// handshake per session.
		set(&c.Concurrency, DefaultOpeners)
		c.Conns, c.FullHandshakes = c.Sessions, true
	default:
		set(&c.Concurrency, 1)
		set(&c.Conns, 1)
	}
	if c.DataSize < 0 {
		c.DataSize = 0
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.Observe == 0 {
		c.Observe = DefaultObserve
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = DefaultOpTimeout
	}
	if c.MaxTime == 0 {
		c.MaxTime = DefaultMaxTime
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return c
}

// Validate rejects a config that cannot run, naming the field. Zero
// fields are fine: they take defaults.
func (c Config) Validate() error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrBadConfig, field, fmt.Sprintf(format, a...))
	}
	if !slices.Contains(Scenarios, c.Scenario) {
		return bad("Scenario", "%q: want one of %s", c.Scenario, strings.Join(Scenarios, ", "))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"Ops", c.Ops}, {"Concurrency", c.Concurrency}, {"Conns", c.Conns}, {"Locks", c.Locks}, {"Sessions", c.Sessions}, {"Cachers", c.Cachers}} {
		if f.v < 0 {
			return bad(f.name, "%d is negative", f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"Duration", c.Duration}, {"Window", c.Window}, {"OpTimeout", c.OpTimeout}, {"MaxTime", c.MaxTime}, {"Observe", c.Observe}, {"Flood", c.Flood}} {
		if f.v < 0 {
			return bad(f.name, "%v is negative", f.v)
		}
	}
	if c.Reference < 0 || math.IsNaN(c.Reference) || math.IsInf(c.Reference, 0) {
		return bad("Reference", "%v: want a cycles/s figure, or 0 for none", c.Reference)
	}
	if c.Reference > 0 && c.Scenario != ScenarioContended {
		return bad("Reference", "only the contended scenario compares its goodput with a reference")
	}
	if c.ReadFrom != "" && !slices.Contains(readFroms, c.ReadFrom) {
		return bad("ReadFrom", "%q: want one of %s, or nothing", c.ReadFrom, strings.Join(readFroms, ", "))
	}
	if c.Kill != "" && c.Kill != "kill" && c.Kill != "stop" && c.Kill != "stall" && c.Kill != "freeze" {
		return bad("Kill", "%q: want kill, stop, stall, freeze or nothing", c.Kill)
	}
	if (c.Kill != "" || c.Flood > 0) && c.Scenario != ScenarioStorm {
		return bad("Kill", "only the storm scenario signals or floods the leader")
	}
	d := c.withDefaults()
	switch {
	case d.DataSize > 64<<10:
		return bad("DataSize", "%d is above the server's node data limit (64 KiB)", d.DataSize)
	case d.Scenario == ScenarioSessions && d.Conns > d.Sessions:
		return bad("Conns", "%d connections for %d sessions: every connection carries at least its own session", d.Conns, d.Sessions)
	case d.Scenario == ScenarioContended && d.Conns > d.Concurrency:
		return bad("Conns", "%d connections for %d clients", d.Conns, d.Concurrency)
	case d.Scenario == ScenarioWatch && (d.Concurrency != 1 || d.Conns != 1):
		return bad("Concurrency", "watch runs one writer and one watcher on their own connections")
	case d.Scenario != ScenarioSessions && d.Scenario != ScenarioStorm && d.Scenario != ScenarioContended && d.Conns > d.Concurrency:
		return bad("Conns", "%d connections for %d goroutines", d.Conns, d.Concurrency)
	}
	if c.Prefix != "" && (!strings.HasPrefix(c.Prefix, "/") || c.Prefix == "/" || strings.HasSuffix(c.Prefix, "/")) {
		return bad("Prefix", "%q must be an absolute path below /", c.Prefix)
	}
	if err := c.Client.Validate(); err != nil {
		return bad("Client", "%v", err)
	}
	if !c.AllowRemote {
		for _, e := range c.Client.Endpoints {
			if err := checkLoopback(e); err != nil {
				return err
			}
		}
		if c.Admin != "" {
			if err := checkLoopback(c.Admin); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkLoopback returns ErrNotLoopback unless addr's host is "localhost"
// or a loopback IP. Names are not resolved: a name that happens to point
// at 127.0.0.1 still needs AllowRemote.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: %q: %v", ErrBadConfig, addr, err)
	}
	if isLoopback(host) {
		return nil
	}
	return fmt.Errorf("%w: %s (pass --allow-remote to benchmark it anyway)", ErrNotLoopback, addr)
}
