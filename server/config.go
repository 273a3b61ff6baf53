package server

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/session"
)

// Default listen addresses (DESIGN.md, Operations).
const (
	DefaultClientAddr = "127.0.0.1:7420" // QUIC, UDP
	DefaultRaftAddr   = "127.0.0.1:7421" // raft, TCP
	DefaultHTTPAddr   = "127.0.0.1:7422" // admin HTTP, TCP
	// DevID is the member id --dev uses when none is given.
	DevID = "dev"
	// DefaultSnapshotMinInterval is Config.SnapshotMinInterval's default.
	DefaultSnapshotMinInterval = 30 * time.Second
)

// Peer names one member of the initial cluster.
type Peer struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
}

// Config configures one cluster member. Start from DefaultConfig.
type Config struct {
	// ID names this member in the cluster; unique and stable across restarts.
	ID string
	// DataDir holds raft/, fsm/ and snapshots/.
	DataDir string
	// RaftAddr is the TCP address raft binds. Port 0 picks a free port.
	RaftAddr string
	// RaftAdvertise is the raft address other members dial; "" means the
	// address the listener bound (which must then not be unspecified).
	RaftAdvertise string
	// ClientAddr is the client (QUIC, UDP) address this member publishes to
	// clients and other members for redirects.
	ClientAddr string
	// HTTPAddr is the admin HTTP address. Port 0 picks a free port.
	HTTPAddr string
	// APIAddr is the HTTP/JSON API and web console address (TCP, TLS with
	// the client front's certificate); "" serves no API. latchd's default
	// is DefaultAPIAddr. Port 0 picks a free port.
	APIAddr string
	// APIHosts are names, besides the defaults, that the API answers to in
	// the Host header: by default the host of APIAddr (every IP address
	// when it is unspecified), localhost, 127.0.0.1, ::1 and the names and
	// addresses of the client front's certificate. Any other Host is
	// refused (DNS rebinding). "*" accepts every Host.
	APIHosts []string
	// APIGatewayCA is a PEM file of the CA (or CAs) whose certificates
	// mark an API peer as a gateway (latch gateway): its requests are
	// served for the identity it names in Latch-Identity, which it
	// verified itself. "" trusts no gateway. Give it a CA that issues
	// gateway certificates only: any holder of one acts as any identity.
	APIGatewayCA string
	// APIMaxRequests bounds the API requests (long polls included, event
	// streams not) one member serves at once; more are refused with
	// ErrBusy. Default 4096.
	APIMaxRequests int
	// APIMaxWatches bounds the API's event streams (watches, election
	// observations, console views) open on one member; more are refused
	// with ErrTooManyWatches. Default 10000.
	APIMaxWatches int
	// HTTPAdvertise is the admin address other members use to reach this
	// one (joins, redirects); "" means the bound address.
	HTTPAdvertise string

	// Bootstrap is the initial member list. Every member started with the
	// same list bootstraps the same cluster; it must include this member.
	// Ignored when the data dir already holds raft state.
	Bootstrap []Peer
	// Join is the admin HTTP address (host:port or http://host:port) of any
	// member of an existing cluster; this member asks to be added.
	Join string
	// Dev bootstraps a single-member cluster of this member alone.
	Dev bool

	// Limits are the cluster settings this member records when it is the
	// first leader of a cluster that has none (settings.go). Once the log
	// holds settings they win on every member; differing values here are
	// ignored with a warning.
	Limits namespace.Limits

	// Raft timing, chosen for a LAN (see doc.go, "Failover timing" for the
	// chain they bound and why they are safe).
	//
	// HeartbeatTimeout is how long a follower hears nothing from the
	// leader before it asks for votes (raft waits a random 1-2x between
	// checks, so a dead leader is noticed 1-3x after its last heartbeat);
	// the leader heartbeats every tenth of it. A crashed leader is
	// detected at once without it (raftnode/crashdetect.go). Default 500ms.
	HeartbeatTimeout time.Duration
	// ElectionTimeout is how long a candidate waits for votes before it
	// tries again (random 1-2x). At least HeartbeatTimeout. Default 500ms.
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout is how long a leader keeps leading without
	// hearing from a quorum; then it steps down. At most HeartbeatTimeout,
	// so a deposed leader stops answering keepalives before a successor
	// can serve (doc.go, "Failover timing"). Default 500ms.
	LeaderLeaseTimeout time.Duration
	// CommitTimeout bounds how long a follower may wait to learn of a commit
	// when no new entries flow. Default 20ms.
	CommitTimeout time.Duration
	// MaxAppendEntries is the most entries per replication batch and per FSM
	// apply batch. Default 256.
	MaxAppendEntries int

	// SnapshotThreshold is how many new log entries trigger a snapshot.
	// Default 8192.
	SnapshotThreshold uint64
	// SnapshotInterval is how often raft checks SnapshotThreshold. Default 2m.
	SnapshotInterval time.Duration
	// TrailingLogs is how many entries stay after a snapshot, so slightly
	// lagging followers catch up from the log. Default 10240.
	TrailingLogs uint64
	// SnapshotRetain is how many snapshots stay on disk. Default 2.
	SnapshotRetain int

	// ApplyTimeout bounds how long Propose waits for raft to accept an entry
	// when ctx has no earlier deadline. Default 10s.
	ApplyTimeout time.Duration

	// Client cache (cache.go).

	// CacheLease is how long a client may serve its cached nodes after the
	// leader confirmed its leadership for it; writes wait at most this long
	// for a client that does not acknowledge an invalidation. At most
	// HeartbeatTimeout, so that no new leader acknowledges a write before
	// every lease of the old one ran out. Default HeartbeatTimeout.
	CacheLease time.Duration
	// MaxCachedPerConn caps the nodes one client connection caches on the
	// leader; a read beyond it is answered but not cached. Default 10000.
	MaxCachedPerConn int

	// Member traffic (raftnet.go, raftnode/transport.go, auth.go).

	// ClusterCA (PEM) is the CA of the cluster's members and admins: a raft
	// peer must present a member certificate it signed, and the admin
	// endpoint verifies client certificates with it. Required unless Dev.
	ClusterCA string
	// MemberCert and MemberKey (PEM) are this member's certificate, which
	// must be a member certificate naming ID (session.MemberID; make one
	// with `latch cert member`). It is presented on raft connections both
	// ways, served by the admin HTTPS endpoint, and by the client listener
	// unless TLSCert is set. Required unless Dev: Dev issues one from its
	// development CA in <DataDir>/tls.
	MemberCert, MemberKey string
	// AdminCheck, when set, names further admins (e.g. from replicated
	// rules); an identity is an admin when Admins lists it or AdminCheck
	// says so.
	AdminCheck AdminChecker
	// SnapshotMinInterval is the least time between two snapshots asked
	// for on the admin endpoint; earlier requests get 429. Default 30s.
	SnapshotMinInterval time.Duration
	// Recover rewrites this member's raft configuration to exactly these
	// peers before raft starts (hashicorp/raft RecoverCluster), for a
	// cluster that lost quorum for good: run every survivor once with the
	// same list of survivors. The namespace is kept. Then start without it.
	Recover []Peer

	// FaultInjection lets the admin endpoint POST /v1/faults cut this
	// member's raft traffic to chosen members (see raftnode/faultlayer.go), for the chaos
	// runner. Never enable it in production: anyone who reaches the admin
	// port can partition the cluster.
	FaultInjection bool
	// RaftLayer, when set, carries raft traffic instead of TCP: New calls
	// it with RaftAddr, and raft's mutual TLS (and FaultInjection's layer)
	// run over the stream layer it returns, whose Addr is this member's
	// raft address; RaftAdvertise is not used. For in-process test
	// clusters on an in-memory network whose partitions the test controls
	// (servertest.Network). Nil: TCP.
	RaftLayer func(addr string) (raft.StreamLayer, error)

	// Client front (front.go; packages quicfront, lease and watch).

	// TLSCert and TLSKey (PEM files) are the client listener's certificate,
	// required unless Dev: Dev without them makes a development PKI in
	// <DataDir>/tls (its ca.pem is what `latch` trusts next to latchd --dev).
	TLSCert, TLSKey string
	// TLSClientCA (PEM) requires every client to present a certificate it
	// signed (mutual TLS); the certificate's identity is recorded on the
	// sessions the client opens and checked when they are resumed.
	TLSClientCA string
	// Transport tunes QUIC (frame limit, streams, idle and handshake
	// timeouts); zero fields take session.DefaultConfig's values.
	Transport session.Config
	// Admins are identities (certificate CN or URI SAN) that administer the
	// cluster: the admin endpoint lets them change membership, take
	// snapshots and backups and replace live members (auth.go), and the
	// first leader makes them admins of / in the replicated ACL rules when
	// there are none yet.
	Admins []string
	// ACLDefault is the right set of identities no ACL rule names, written
	// by the same bootstrap: ACLAllow, ACLDeny, or "" for allow in Dev or
	// without TLSClientCA (no identities to tell apart) and deny with
	// mutual TLS. Changing it later takes `latch acl set '*' / ...`.
	ACLDefault string
	// Cell makes this member's cluster one cell of a larger namespace: it
	// serves /Cell and the paths below it, and refuses any other path with
	// session.ErrWrongCell before anything is applied. The ready leader
	// creates /Cell when it is missing. "" (the default): no cell, every
	// path is served.
	Cell string
	// MaxSessionsPerIdentity bounds the open sessions of one TLS identity.
	// Default 16384.
	MaxSessionsPerIdentity int
	// MaxAnonymousSessions bounds the sessions of clients without a
	// certificate (which all share the identity "") per client host, so
	// one of them cannot use up the sessions of every other. Default 10000.
	MaxAnonymousSessions int
	// MaxSessions bounds the open sessions of the whole cluster. Default
	// 100000.
	MaxSessions int
	// MaxWatchesPerIdentity bounds the watches of one identity across all
	// its connections (MaxWatchesPerConn still bounds each connection).
	// Default 10000.
	MaxWatchesPerIdentity int
	// ExpiryBatch is the most sessions one expiry command ends. Default 256.
	ExpiryBatch int
	// ExpiryTick is the longest the leader's reaper sleeps between looks
	// at the lease table. Default 500ms.
	ExpiryTick time.Duration
	// WatchHistory is how many recent events are kept for watches that
	// start from a past revision. Default 100000.
	WatchHistory int
	// WatchBuffer is how many events may wait for one watch's client;
	// beyond it the watch ends with a Resync. Default 1024.
	WatchBuffer int
	// MaxWatchesPerConn bounds the watches of one connection. Default 1024.
	MaxWatchesPerConn int
	// MaxRequestsPerConn bounds the requests (watches included) one
	// connection has in flight; more are refused with ErrBusy. Default 4096.
	MaxRequestsPerConn int
	// MaxConns bounds the client connections this member holds at once
	// (each costs ~120 KiB of the leader's memory while idle); more are
	// closed at once with session.ConnBusy and a reason naming the cap.
	// Default 16384: room for 10,000 clients and the tools beside them.
	MaxConns int
	// MaxStreams bounds the request streams in flight across all
	// connections (each may hold a frame being read); more are refused
	// with ErrBusy. Default 16384 (each half-written one holds up to
	// ~16 KiB until its RequestReadTimeout).
	MaxStreams int
	// RequestReadTimeout bounds how long a stream may take to deliver its
	// one request frame (and a connection its Hello): a client that opens
	// streams and sends nothing, or half a frame, holds no slot, goroutine
	// or buffer for longer. Default 10s.
	RequestReadTimeout time.Duration
	// MaxWatchBacklogBytes bounds the bytes of watch events held across
	// all watches (waiting for, or being written to, clients that read
	// slowly), each event counting its path and 48 bytes: a watch that
	// would go beyond it ends with a Resync, as a full WatchBuffer does,
	// and its last frame names the cap. Default 64 MiB.
	MaxWatchBacklogBytes int
	// MaxFailedResumesPerHost is how many failed session resumes (a wrong
	// secret) one client host may make a second, with a burst of twice
	// that; beyond it they are refused by the limiter and each further
	// guess needs a new connection (quicfront/resumelimit.go). A connection may fail
	// 5, then 1 a second. A resume with the right secret is never held
	// back by its host's failures. Default 10.
	MaxFailedResumesPerHost int
	// MaxWatchBytesPerConn bounds the same bytes for one connection's
	// watches, so that one slow client cannot take the whole backlog.
	// Default 16 MiB.
	MaxWatchBytesPerConn int
	// MaxReconnectGrace caps the grace a new leader adds to every
	// session's first lease while clients reconnect (package lease:
	// reconnectGrace, expiryCutoff). Default 45s (Chubby's grace period).
	MaxReconnectGrace time.Duration
	// Admission bounds how fast new client connections are let in
	// (quicfront/admission.go); zero fields take their defaults.
	Admission AdmissionConfig
	// IdleConnTimeout closes a client connection that has no session
	// attached and no request in flight for this long (an idle connection
	// still costs ~60 KiB). Default 2m.
	IdleConnTimeout time.Duration

	// MinFreeSpace is the free space (bytes) the data dir's file system
	// must keep: below it the member refuses writes with ErrNoSpace and
	// applies nothing until space returns (raftnode/diskfull.go). Default 256 MiB;
	// negative turns the guard off.
	MinFreeSpace int64
	// StorageStallTimeout is how long a raft log write may go without
	// returning before the member takes its disk for one that stopped
	// answering and fails (raftnode/stall.go), so that a stuck leader is replaced.
	// Default 5s; negative turns the watch off.
	StorageStallTimeout time.Duration

	// HashCheckInterval is how often the leader has every member hash its
	// state at the same index and compare (raftnode/hashcheck.go). Default 5m;
	// negative turns the schedule off (POST /v1/hash-check still works).
	HashCheckInterval time.Duration

	// Clock is this member's wall clock. The cluster reads it once in its
	// life, to stamp the first entry of a cluster that has no time yet;
	// after that time comes from the log and Monotonic (package clock).
	// Default time.Now.
	Clock func() time.Time
	// Monotonic measures elapsed time, unaffected by wall-clock steps: it
	// advances the cluster time the leader stamps on entries and times
	// session leases. Default: time since the config was made, on Go's
	// monotonic clock.
	Monotonic func() time.Duration
	// Observer is told about every applied batch; may be nil.
	Observer ApplyObserver
	// Logger receives structured logs; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns a configuration with every default filled in and no
// identity: set ID, DataDir and one of Bootstrap, Join or Dev.
func DefaultConfig() Config {
	c := Config{
		RaftAddr:            DefaultRaftAddr,
		ClientAddr:          DefaultClientAddr,
		HTTPAddr:            DefaultHTTPAddr,
		Limits:              namespace.DefaultLimits(),
		HeartbeatTimeout:    500 * time.Millisecond,
		ElectionTimeout:     500 * time.Millisecond,
		LeaderLeaseTimeout:  500 * time.Millisecond,
		CommitTimeout:       20 * time.Millisecond,
		MaxAppendEntries:    256,
		SnapshotThreshold:   8192,
		SnapshotInterval:    2 * time.Minute,
		TrailingLogs:        10240,
		SnapshotRetain:      2,
		ApplyTimeout:        10 * time.Second,
		SnapshotMinInterval: DefaultSnapshotMinInterval,
		Clock:               time.Now,
		Monotonic:           monotonicSince(time.Now()),
		HashCheckInterval:   5 * time.Minute,
		MinFreeSpace:        256 << 20,
		StorageStallTimeout: 5 * time.Second,
	}
	frontDefaults(&c)
	return c
}

// Validate returns an error naming the first bad field, wrapping ErrBadConfig.
func (c *Config) Validate() error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrBadConfig, field, fmt.Sprintf(format, a...))
	}
	if c.ID == "" {
		return bad("ID", "required")
	}
	if strings.ContainsAny(c.ID, " \t\r\n,=") {
		return bad("ID", "%q must not contain spaces, ',' or '='", c.ID)
	}
	if c.DataDir == "" {
		return bad("DataDir", "required")
	}
	for _, a := range []struct{ field, addr string }{
		{"RaftAddr", c.RaftAddr}, {"HTTPAddr", c.HTTPAddr}, {"ClientAddr", c.ClientAddr},
	} {
		if _, _, err := net.SplitHostPort(a.addr); err != nil {
			return bad(a.field, "%q is not host:port: %v", a.addr, err)
		}
	}
	if c.APIAddr != "" {
		if _, _, err := net.SplitHostPort(c.APIAddr); err != nil {
			return bad("APIAddr", "%q is not host:port: %v", c.APIAddr, err)
		}
	}
	for _, h := range c.APIHosts {
		if h == "" || strings.ContainsAny(h, "/:@ \t") && net.ParseIP(strings.Trim(h, "[]")) == nil {
			return bad("APIHosts", "%q is not a host name or IP address", h)
		}
	}
	for _, a := range []struct{ field, addr string }{
		{"RaftAdvertise", c.RaftAdvertise}, {"HTTPAdvertise", c.HTTPAdvertise},
	} {
		if a.addr == "" {
			continue
		}
		if err := checkDialable(a.addr); err != nil {
			return bad(a.field, "%v", err)
		}
	}
	modes := 0
	if len(c.Bootstrap) > 0 {
		modes++
	}
	if c.Join != "" {
		modes++
	}
	if c.Dev {
		modes++
	}
	if modes > 1 {
		return bad("Bootstrap", "Bootstrap, Join and Dev are mutually exclusive")
	}
	if err := checkPeers("Bootstrap", c.ID, c.Bootstrap); err != nil {
		return err
	}
	if err := checkPeers("Recover", c.ID, c.Recover); err != nil {
		return err
	}
	if err := c.validateMemberTLS(); err != nil {
		return err
	}
	if c.Join != "" {
		if _, err := adminapi.BaseURL(c.Join); err != nil {
			return bad("Join", "%v", err)
		}
	}
	if err := c.Limits.Validate(); err != nil {
		return bad("Limits", "%v", err)
	}
	if c.Cell != "" {
		if err := namespace.ValidatePath("/"+c.Cell, namespace.DefaultLimits()); err != nil || strings.Contains(c.Cell, "/") {
			return bad("Cell", "%q is not one path component", c.Cell)
		}
	}
	switch {
	case c.HeartbeatTimeout < 5*time.Millisecond:
		return bad("HeartbeatTimeout", "%v is below 5ms", c.HeartbeatTimeout)
	case c.ElectionTimeout < c.HeartbeatTimeout:
		return bad("ElectionTimeout", "%v is below HeartbeatTimeout %v", c.ElectionTimeout, c.HeartbeatTimeout)
	case c.CacheLease < 0 || c.CacheLease > c.HeartbeatTimeout:
		return bad("CacheLease", "%v must be between 0 (HeartbeatTimeout) and HeartbeatTimeout %v", c.CacheLease, c.HeartbeatTimeout)
	case c.MaxCachedPerConn < 0:
		return bad("MaxCachedPerConn", "%d is negative", c.MaxCachedPerConn)
	case c.LeaderLeaseTimeout < 5*time.Millisecond || c.LeaderLeaseTimeout > c.HeartbeatTimeout:
		return bad("LeaderLeaseTimeout", "%v must be between 5ms and HeartbeatTimeout %v", c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	case c.CommitTimeout <= 0:
		return bad("CommitTimeout", "%v must be positive", c.CommitTimeout)
	case c.MaxAppendEntries < 1 || c.MaxAppendEntries > 1024:
		return bad("MaxAppendEntries", "%d must be in 1..1024", c.MaxAppendEntries)
	case c.SnapshotThreshold < 1:
		return bad("SnapshotThreshold", "must be positive")
	case c.SnapshotInterval < 5*time.Millisecond:
		return bad("SnapshotInterval", "%v is below 5ms", c.SnapshotInterval)
	case c.TrailingLogs < 1:
		return bad("TrailingLogs", "must be positive")
	case c.SnapshotRetain < 1:
		return bad("SnapshotRetain", "must be at least 1")
	case c.SnapshotMinInterval < 0:
		return bad("SnapshotMinInterval", "%v is negative", c.SnapshotMinInterval)
	case c.ApplyTimeout <= 0:
		return bad("ApplyTimeout", "%v must be positive", c.ApplyTimeout)
	case c.Clock == nil:
		return bad("Clock", "required (use time.Now)")
	case c.Monotonic == nil:
		return bad("Monotonic", "required (DefaultConfig sets it)")
	}
	if err := c.validateACL(); err != nil {
		return err
	}
	return c.validateFront()
}

// monotonicSince returns the time elapsed since start on Go's monotonic
// clock.
func monotonicSince(start time.Time) func() time.Duration {
	return func() time.Duration { return time.Since(start) }
}

// checkPeers checks a non-empty peer list: ids unique and set, addresses
// dialable, this member listed.
func checkPeers(field, self string, peers []Peer) error {
	if len(peers) == 0 {
		return nil
	}
	seen := map[string]bool{}
	for i, p := range peers {
		switch {
		case p.ID == "":
			return fmt.Errorf("%w: %s: peer %d has no id", ErrBadConfig, field, i)
		case seen[p.ID]:
			return fmt.Errorf("%w: %s: peer id %q listed twice", ErrBadConfig, field, p.ID)
		}
		seen[p.ID] = true
		if err := checkDialable(p.RaftAddr); err != nil {
			return fmt.Errorf("%w: %s: peer %q: %v", ErrBadConfig, field, p.ID, err)
		}
	}
	if !seen[self] {
		return fmt.Errorf("%w: %s: does not list this member %q", ErrBadConfig, field, self)
	}
	return nil
}

// checkDialable rejects addresses another member could not dial: no port,
// port 0 or an unspecified host.
func checkDialable(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %v", addr, err)
	}
	if port == "0" || port == "" {
		return fmt.Errorf("%q has no port", addr)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return fmt.Errorf("%q is not an address others can dial", addr)
	}
	return nil
}
