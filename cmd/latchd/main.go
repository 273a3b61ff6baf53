// Command latchd runs one member of a latch cluster.
//
//	latchd --dev                                  # single member, data in ./latch-data
//	latchd --id n1 --data-dir /var/lib/latch --bootstrap n1=10.0.0.1:7421,n2=10.0.0.2:7421,n3=10.0.0.3:7421 \
//	       --raft-addr 10.0.0.1:7421 --client-addr 10.0.0.1:7420 --http-addr 10.0.0.1:7422 \
//	       --cluster-ca ca.pem --member-cert n1.pem --member-key n1-key.pem --admins ops
//	latchd --id n4 --data-dir /var/lib/latch --join 10.0.0.1:7422 ...
//	latchd --id n1 ... --recover n1=10.0.0.1:7421     # once, after losing quorum for good
//
// --config FILE reads a JSON object whose keys are flag names
// ({"id": "n1", "bootstrap": "n1=...,n2=...", "dev": false}); flags given
// on the command line win. SIGTERM or SIGINT shuts the member down cleanly
// and exits 0. All logic lives in package server; this is wiring.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/latch-io/latch/cmd/internal/flagfile"
	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server"
	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/session"
)

func main() {
	setGCPercent()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// defaultGCPercent is latchd's GOGC unless the environment sets one. A
// member's heap is mostly long-lived connection and session state (about
// 100 KiB per client connection), so Go's default of 100 collects it over
// and over while new connections allocate: with 4,000-5,000 clients
// connecting at once on 2 cores, mark assists slowed handshakes past their
// clients' patience, the abandoned ones were retried, and the storm fed
// itself (measured: 0 of 3 runs of `latch bench storm --sessions 5000`
// held at GOGC=100, 2 of 2 at 400). The price is memory: about 150 KiB of
// RSS per connection instead of 100.
const defaultGCPercent = 400

func setGCPercent() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
	}
}

// errUsage marks errors in flags or the config file (exit status 2).
var errUsage = errors.New("latch: usage")

// DevDataDir is where --dev keeps its data unless --data-dir says otherwise.
const DevDataDir = "latch-data"

// options are latchd's flags. New flags register in register and reach the
// server config in serverConfig.
type options struct {
	configFile string

	id, dataDir                       string
	clientAddr, raftAddr, httpAddr    string
	apiAddr                           string
	apiHosts                          string
	apiGatewayCA                      string
	raftAdvertise, httpAdvertise      string
	bootstrap, join                   string
	dev                               bool
	heartbeatTimeout, electionTimeout time.Duration
	leaderLease, commitTimeout        time.Duration
	snapshotThreshold, trailingLogs   uint64
	snapshotInterval                  time.Duration
	logLevel, logFormat               string
	faultInjection                    bool
	tlsCert, tlsKey, tlsClientCA      string
	clusterCA, memberCert, memberKey  string
	recover                           string
	lockDelay, maxLockDelay           time.Duration
	hashCheckInterval                 time.Duration
	minFreeMiB                        int64
	storageStall                      time.Duration
	lockHistory                       int
	lockHistoryAge                    time.Duration
	admins, aclDefault                string
	cell                              string
	maxSessions, maxSessionsPerID     int
	maxAnonSessions, maxWatchesPerID  int
	version                           bool
	maxConns, maxStreams              int
	admission                         server.AdmissionConfig
	maxReconnectGrace                 time.Duration
	maxRequestsPerConn                int
	maxWatchBacklogBytes              int
	maxWatchBytesPerConn              int
	maxFailedResumesPerHost           int
	maxCachedPerConn                  int
	cacheLease                        time.Duration
	idleConnTimeout                   time.Duration
}

func (o *options) register(fs *flag.FlagSet) {
	def := server.DefaultConfig()
	o.admission = def.Admission // fields without a flag keep their default
	fs.StringVar(&o.configFile, "config", "", "JSON file whose keys are flag names; command-line flags win")
	fs.StringVar(&o.id, "id", "", `member id, unique in the cluster and stable across restarts (--dev: "dev")`)
	fs.StringVar(&o.dataDir, "data-dir", "", "data directory (--dev: ./"+DevDataDir+")")
	fs.StringVar(&o.clientAddr, "client-addr", def.ClientAddr, "client (QUIC, UDP) address, published to clients for redirects")
	fs.StringVar(&o.raftAddr, "raft-addr", def.RaftAddr, "raft (TCP) bind address")
	fs.StringVar(&o.httpAddr, "http-addr", def.HTTPAddr, "admin HTTP bind address (/metrics, /healthz, /readyz, /v1/...)")
	fs.StringVar(&o.apiAddr, "api-addr", server.DefaultAPIAddr, `HTTP/JSON API and web console (HTTPS, TCP) bind address, with the client certificate and client CA; "" turns it off`)
	fs.StringVar(&o.apiGatewayCA, "api-gateway-ca", "", "CA certificate (PEM) of latch gateways: an API client presenting a certificate it issued may act for the identity it names (a gateway verified it); use a CA that issues gateway certificates only")
	fs.StringVar(&o.apiHosts, "api-hosts", "", `names, comma separated, the API answers to in the Host header besides its --api-addr host, localhost, 127.0.0.1, ::1 and its certificate's names ("*": any; other Hosts are refused against DNS rebinding)`)
	fs.StringVar(&o.raftAdvertise, "raft-advertise", "", "raft address other members dial (default: the bound --raft-addr)")
	fs.StringVar(&o.httpAdvertise, "http-advertise", "", "admin address other members use (default: the bound --http-addr)")
	fs.StringVar(&o.bootstrap, "bootstrap", "", "initial members as id=raftaddr,... (the same list on every founding member)")
	fs.StringVar(&o.join, "join", "", "admin address (host:port or https://host:port) of any member of the cluster to join")
	fs.BoolVar(&o.dev, "dev", false, "run a single-member cluster on loopback with data in ./"+DevDataDir)
	fs.DurationVar(&o.heartbeatTimeout, "heartbeat-timeout", def.HeartbeatTimeout, "raft heartbeat timeout: a follower that hears nothing from the leader for this long (1-3x) starts an election")
	fs.DurationVar(&o.electionTimeout, "election-timeout", def.ElectionTimeout, "raft election timeout: how long a candidate waits for votes (at least --heartbeat-timeout)")
	fs.DurationVar(&o.leaderLease, "leader-lease-timeout", 0, "how long a leader leads without hearing from a quorum (at most --heartbeat-timeout; default: equal to it)")
	fs.DurationVar(&o.commitTimeout, "commit-timeout", def.CommitTimeout, "how long an idle leader waits before telling followers of a commit")
	fs.Uint64Var(&o.snapshotThreshold, "snapshot-threshold", def.SnapshotThreshold, "new log entries that trigger a snapshot")
	fs.DurationVar(&o.snapshotInterval, "snapshot-interval", def.SnapshotInterval, "how often to check --snapshot-threshold")
	fs.Uint64Var(&o.trailingLogs, "trailing-logs", def.TrailingLogs, "log entries kept after a snapshot")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "text or json")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "client listener certificate (PEM); required unless --dev, which makes a dev PKI in <data-dir>/tls")
	fs.StringVar(&o.tlsKey, "tls-key", "", "private key (PEM) of --tls-cert")
	fs.StringVar(&o.tlsClientCA, "tls-client-ca", "", "CA (PEM) that must sign client certificates: mutual TLS, the certificate names the client")
	fs.StringVar(&o.clusterCA, "cluster-ca", "", "CA (PEM) of the cluster: raft peers must present a member certificate it signed; admin clients a certificate it signed (required unless --dev)")
	fs.StringVar(&o.memberCert, "member-cert", "", "this member's certificate (PEM, from 'latch cert member'): raft mutual TLS, admin HTTPS, and the client listener unless --tls-cert (required unless --dev)")
	fs.StringVar(&o.memberKey, "member-key", "", "private key (PEM) of --member-cert")
	fs.StringVar(&o.recover, "recover", "", "after losing quorum for good: rewrite the raft configuration to these survivors (id=raftaddr,...) before starting; run once on each survivor, then restart without it")
	fs.DurationVar(&o.lockDelay, "lock-delay", time.Duration(def.Limits.DefaultLockDelayMillis)*time.Millisecond,
		"how long a lock whose holder's session expired stays ungranted, unless the request asks otherwise; a cluster setting: only the first leader's value counts, change it with PUT /v1/limits")
	fs.Int64Var(&o.minFreeMiB, "min-free-mib", def.MinFreeSpace>>20,
		"free space (MiB) the data dir's disk must keep: below it writes are refused with \"no space left\" until space is freed (negative: off)")
	fs.DurationVar(&o.storageStall, "storage-stall-timeout", def.StorageStallTimeout,
		"a raft log write that has not returned after this long means the disk stopped answering: the member stops (exit 1) so that another leads (negative: off)")
	fs.DurationVar(&o.hashCheckInterval, "hash-check-interval", def.HashCheckInterval,
		"how often the leader has every member hash its state at one index and compare; a member in the minority stops serving (negative: off)")
	fs.DurationVar(&o.maxLockDelay, "max-lock-delay", time.Duration(def.Limits.MaxLockDelayMillis)*time.Millisecond,
		"the longest lock-delay a request may ask for; a cluster setting like --lock-delay")
	fs.IntVar(&o.lockHistory, "lock-history", def.Limits.LockHistoryMax,
		"lock history records the cluster keeps (grants and ends, latch locks --history); 0 keeps none (a cluster setting: the first leader's value)")
	fs.DurationVar(&o.lockHistoryAge, "lock-history-age", 0,
		"also drop lock history records older than this (0: no age bound; a cluster setting like --lock-history)")
	fs.BoolVar(&o.faultInjection, "fault-injection", false, "serve POST /v1/faults so 'latch chaos' can cut raft traffic (tests only: never in production)")
	fs.IntVar(&o.maxConns, "max-conns", server.DefaultMaxConns, "client connections held at once; more are closed at once saying so")
	fs.Float64Var(&o.admission.HandshakeRate, "handshake-rate", server.DefaultHandshakeRate, "full TLS handshakes admitted per second at most (halved while the member is short of CPU); more connection attempts are refused before any cryptography, and clients back off")
	fs.IntVar(&o.admission.HandshakeBurst, "handshake-burst", server.DefaultHandshakeBurst, "client handshakes that may start at once after a quiet spell")
	fs.IntVar(&o.admission.MaxHandshakesInFlight, "max-handshakes-in-flight", server.DefaultMaxHandshakesInFlight, "client handshakes started and not finished, at most")
	fs.Float64Var(&o.admission.FailedHandshakesPerHost, "failed-handshakes-per-host", server.DefaultFailedHandshakesPerHost, "failed client handshakes per second one host may cause before its attempts are refused")
	fs.Float64Var(&o.admission.ProbesPerHost, "probes-per-host", server.DefaultProbesPerHost, "leader probes per second answered for one host; more are dropped")
	fs.DurationVar(&o.maxReconnectGrace, "max-reconnect-grace", server.DefaultMaxReconnectGrace, "most time a new leader adds to every session's first lease while clients reconnect")
	fs.IntVar(&o.maxStreams, "max-streams", server.DefaultMaxStreams, "requests in flight across all client connections; more get 'server busy'")
	fs.IntVar(&o.maxRequestsPerConn, "max-requests-per-conn", server.DefaultMaxRequestsPerConn,
		"requests (watches and waiting locks included) in flight on one connection; held locks take none")
	fs.IntVar(&o.maxWatchBacklogBytes, "max-watch-backlog-bytes", server.DefaultMaxWatchBacklogBytes,
		"bytes of watch events held for slow readers across all watches (path + 48 per event); a watch beyond it ends with a resync naming the cap")
	fs.IntVar(&o.maxWatchBytesPerConn, "max-watch-bytes-per-conn", server.DefaultMaxWatchBytesPerConn,
		"the same bytes for one client connection's watches; a watch beyond it ends with a resync naming the cap")
	fs.IntVar(&o.maxFailedResumesPerHost, "max-failed-resumes-per-host", server.DefaultMaxFailedResumesPerHost,
		"failed session resumes (wrong secret) one client host may make a second, burst twice that; more are refused saying so (a right secret always resumes)")
	fs.IntVar(&o.maxCachedPerConn, "max-cached-per-conn", server.DefaultMaxCachedPerConn,
		"nodes one client connection may hold in its client cache (client.Cached); reads beyond it are answered uncached")
	fs.DurationVar(&o.cacheLease, "cache-lease", 0,
		"how long a client may serve its cache after the leader confirmed its leadership, and the longest a write waits for a client that does not acknowledge an invalidation; at most --heartbeat-timeout (0: equal to it)")
	fs.StringVar(&o.cell, "cell", "", "serve one cell of a larger namespace: only /NAME and the paths below it (others are refused with WrongCell, naming their cell); the first leader creates /NAME. Default: no cell, every path")
	fs.StringVar(&o.admins, "admins", "", "identities (client certificate CN or URI SAN), comma separated (Go-quoted for any text; \"\" is clients without a certificate): admins on the admin endpoint (membership, snapshots, backups; never \"\" there), and made admins of / by the first leader when the cluster has no ACL rules (--dev: dev-$USER, the CLI's dev identity)")
	fs.StringVar(&o.aclDefault, "acl-default", "", `rights of identities no ACL rule names, set once by the first leader: "allow" (read, write, create, delete) or "deny"; default allow with --dev or without --tls-client-ca, deny with it`)
	fs.IntVar(&o.maxSessions, "max-sessions", def.MaxSessions, "open sessions in the whole cluster")
	fs.IntVar(&o.maxSessionsPerID, "max-sessions-per-identity", def.MaxSessionsPerIdentity, "open sessions of one client identity")
	fs.IntVar(&o.maxAnonSessions, "max-anonymous-sessions-per-host", def.MaxAnonymousSessions, "open sessions of clients without a certificate (they share one identity) per client IP address")
	fs.IntVar(&o.maxWatchesPerID, "max-watches-per-identity", def.MaxWatchesPerIdentity, "open watches of one client identity, across its connections")
	fs.DurationVar(&o.idleConnTimeout, "idle-conn-timeout", server.DefaultIdleConnTimeout,
		"close a client connection with no session and no request for this long")
	fs.BoolVar(&o.version, "version", false, "print the version and build of this binary and exit")
}

// failLinger is how long a failed member stays up, serving only its admin
// endpoint's reads, before it exits.
const failLinger = 3 * time.Second

// loadConfigFile sets every flag named in the JSON file that the command
// line did not set, by flagfile's type rules (numbers as given, booleans
// only for booleans, durations as strings, lists of strings joined with
// commas, as for bootstrap and admins).
func loadConfigFile(fs *flag.FlagSet, path string) error {
	err := flagfile.Apply(fs, path, func(key string) (string, bool) { return key, key != "config" && key != "version" })
	if err != nil {
		return fmt.Errorf("%w: --config: %v", errUsage, err)
	}
	return nil
}

// parseAdmins reads --admins: identities separated by commas; a Go-quoted
// item may hold anything ("" names clients without a certificate).
func parseAdmins(s string) ([]string, error) {
	var out []string
	for _, item := range splitList(s) {
		if strings.HasPrefix(item, `"`) {
			u, err := strconv.Unquote(item)
			if err != nil {
				return nil, fmt.Errorf("%w: --admins: %s: %v", errUsage, item, err)
			}
			item = u
		}
		out = append(out, item)
	}
	return out, nil
}

// splitList splits a comma-separated flag, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func parsePeers(flag, s string) ([]server.Peer, error) {
	if s == "" {
		return nil, nil
	}
	var peers []server.Peer
	for _, part := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("%w: %s: %q is not id=raftaddr", errUsage, flag, part)
		}
		peers = append(peers, server.Peer{ID: id, RaftAddr: addr})
	}
	return peers, nil
}

func (o *options) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return nil, fmt.Errorf("%w: --log-level %q: want debug, info, warn or error", errUsage, o.logLevel)
	}
	hopts := &slog.HandlerOptions{Level: level}
	switch o.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, hopts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, hopts)), nil
	}
	return nil, fmt.Errorf("%w: --log-format %q: want text or json", errUsage, o.logFormat)
}

func (o *options) serverConfig(logger *slog.Logger) (server.Config, error) {
	cfg := server.DefaultConfig()
	cfg.ID, cfg.DataDir, cfg.Dev = o.id, o.dataDir, o.dev
	if o.dev {
		if cfg.ID == "" {
			cfg.ID = server.DevID
		}
		if cfg.DataDir == "" {
			cfg.DataDir = DevDataDir
		}
	}
	cfg.ClientAddr, cfg.RaftAddr, cfg.HTTPAddr, cfg.APIAddr = o.clientAddr, o.raftAddr, o.httpAddr, o.apiAddr
	cfg.RaftAdvertise, cfg.HTTPAdvertise = o.raftAdvertise, o.httpAdvertise
	cfg.Join = o.join
	peers, err := parsePeers("--bootstrap", o.bootstrap)
	if err != nil {
		return cfg, err
	}
	cfg.Bootstrap = peers
	cfg.HeartbeatTimeout, cfg.ElectionTimeout = o.heartbeatTimeout, o.electionTimeout
	cfg.LeaderLeaseTimeout, cfg.CommitTimeout = o.leaderLease, o.commitTimeout
	if o.leaderLease == 0 {
		cfg.LeaderLeaseTimeout = cfg.HeartbeatTimeout
	}
	cfg.SnapshotThreshold, cfg.SnapshotInterval, cfg.TrailingLogs = o.snapshotThreshold, o.snapshotInterval, o.trailingLogs
	cfg.FaultInjection = o.faultInjection
	cfg.HashCheckInterval = o.hashCheckInterval
	cfg.MinFreeSpace = o.minFreeMiB << 20
	cfg.StorageStallTimeout = o.storageStall
	cfg.Limits.DefaultLockDelayMillis = o.lockDelay.Milliseconds()
	cfg.Limits.MaxLockDelayMillis = o.maxLockDelay.Milliseconds()
	cfg.Limits.LockHistoryMax = o.lockHistory
	cfg.Limits.LockHistoryMaxAgeMillis = o.lockHistoryAge.Milliseconds()
	cfg.TLSCert, cfg.TLSKey, cfg.TLSClientCA = o.tlsCert, o.tlsKey, o.tlsClientCA
	cfg.MaxConns, cfg.MaxStreams = o.maxConns, o.maxStreams
	cfg.MaxWatchBacklogBytes, cfg.MaxWatchBytesPerConn = o.maxWatchBacklogBytes, o.maxWatchBytesPerConn
	cfg.MaxFailedResumesPerHost = o.maxFailedResumesPerHost
	cfg.Admission, cfg.MaxReconnectGrace = o.admission, o.maxReconnectGrace
	cfg.MaxCachedPerConn, cfg.CacheLease = o.maxCachedPerConn, o.cacheLease
	cfg.MaxRequestsPerConn = o.maxRequestsPerConn
	cfg.IdleConnTimeout = o.idleConnTimeout
	if cfg.MaxRequestsPerConn <= server.DefaultMaxWatchesPerConn { // watches stay below requests
		cfg.MaxWatchesPerConn = max(cfg.MaxRequestsPerConn/2, 1)
	}
	cfg.APIHosts = splitList(o.apiHosts)
	cfg.APIGatewayCA = o.apiGatewayCA
	if cfg.Admins, err = parseAdmins(o.admins); err != nil {
		return cfg, err
	}
	if o.dev && len(cfg.Admins) == 0 {
		cfg.Admins = []string{session.DevIdentity()} // the CLI's dev certificate for this OS user
	}
	cfg.ACLDefault = o.aclDefault
	cfg.Cell = o.cell
	cfg.MaxSessions, cfg.MaxSessionsPerIdentity = o.maxSessions, o.maxSessionsPerID
	cfg.MaxAnonymousSessions, cfg.MaxWatchesPerIdentity = o.maxAnonSessions, o.maxWatchesPerID
	cfg.ClusterCA, cfg.MemberCert, cfg.MemberKey = o.clusterCA, o.memberCert, o.memberKey
	if cfg.Recover, err = parsePeers("--recover", o.recover); err != nil {
		return cfg, err
	}
	cfg.Logger = logger
	return cfg, cfg.Validate()
}

// run is main without the exit, for tests: 0 on a clean shutdown, 1 on a
// failure, 2 on bad usage.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("latchd", flag.ContinueOnError)
	// The flag package's own messages are replaced: -h prints the usage to
	// stdout (it was asked for), a bad flag one line to stderr.
	fs.SetOutput(io.Discard)
	var o options
	o.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stdout, "Usage: latchd [flags]\n\nRuns one member of a latch cluster (latchd --dev: a single member for development).\n\nFlags:\n")
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprintf(stderr, "latchd: %v (latchd -h lists the flags)\n", err)
		return 2
	}
	if o.version {
		fmt.Fprintf(stdout, "latchd %s\n", adminapi.ThisBuild())
		return 0
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "latchd: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if o.configFile != "" {
		if err := loadConfigFile(fs, o.configFile); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	}
	logger, err := o.logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	cfg, err := o.serverConfig(logger)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s, err := server.New(cfg)
	if errors.Is(err, namespace.ErrStorage) {
		logger.Error("refusing to start: this member's data is damaged or unreadable; replace its data dir (start it empty with --join) or restore a snapshot", "err", err)
		return 1
	}
	if err != nil {
		logger.Error("cannot open member", "err", err)
		return 1
	}
	if err := s.Start(); err != nil {
		logger.Error("cannot start member", "err", err)
		s.Close()
		return 1
	}
	select {
	case <-ctx.Done():
		logger.Info("shutting down")
	case <-s.Removed():
		logger.Error("shutting down: this member was removed from the cluster; to bring it back, delete its data dir and start it with --join")
	case <-s.Failed():
		if errors.Is(s.Err(), server.ErrStorageStalled) {
			// raft is stuck in a write that does not return: Close would
			// wait for it for ever, and while this process lives its
			// heartbeats keep the others from electing a leader.
			return 1
		}
		// The member logged why and serves nothing; it lingers a moment
		// so the others can still read its state hash and name it.
		select {
		case <-ctx.Done():
		case <-time.After(failLinger):
		}
		s.Close()
		return 1
	}
	if err := s.Close(); err != nil {
		logger.Error("shutdown", "err", err)
		return 1
	}
	return 0
}
