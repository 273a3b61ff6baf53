package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/namespace/store"

	"github.com/latch-io/latch/server/clock"
	"github.com/latch-io/latch/server/raftnode"
	"github.com/latch-io/latch/server/raftstore"
	"github.com/latch-io/latch/session"
)

// Server is one cluster member: raft over badger-backed stores, the
// namespace state machine, membership and the admin HTTP endpoint.
type Server struct {
	cfg Config
	log *slog.Logger

	// membershipMu serializes joins and removals on the leader: each checks
	// the raft configuration and then changes it and the member metadata,
	// so an address refresh must not interleave with a removal and bring
	// the removed member's metadata back.
	membershipMu sync.Mutex

	store     *store.Store
	clock     *clock.Cluster // the time entries are stamped with
	hashes    *raftnode.HashChecker
	disk      *raftnode.DiskGuard
	handOff   *raftnode.HandOff // a leader that cannot write, or stops, hands leadership over
	raftStore *raftstore.WAL
	logs      raft.LogStore // raftStore behind a cache
	snaps     *raft.FileSnapshotStore
	trans     *raft.NetworkTransport
	crash     *raftnode.CrashDetector // also the stall watch
	sever     *raftnode.SeverLayer    // the raft network, closed at once on a storage stall
	faults    *raftnode.FaultLayer    // under raft's TLS stream layer with Config.FaultInjection; else nil
	memberTLS *session.MemberTLS
	front     *front    // the request handlers, watches, leases and the QUIC front (front.go)
	api       *apiFront // the HTTP/JSON API and console (api.go); nil without APIAddr
	fsm       *raftnode.FSM
	raft      *raft.Raft
	metrics   *serverMetrics

	raftAddr string // advertised raft address
	httpLn   net.Listener
	httpAddr string // advertised admin address
	httpSrv  *http.Server

	hadState bool // raft state existed when Start ran: never auto-join

	leader   *raftnode.Leadership
	verifier verifier
	member   memberState

	obsCh    chan raft.Observation
	observer *raft.Observer

	// ctx ends on Close; background work derives from it.
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex // guards started, closed
	started  bool
	closed   bool
	failErr  error         // why this member stopped serving (storagefault.go)
	failedC  chan struct{} // closed when failErr is set
	stop     chan struct{}
	wg       sync.WaitGroup
	closeErr error
}

// New opens the member's stores and binds its raft and HTTP listeners, so
// RaftAddr and HTTPAddr are known (port 0 resolved) before Start. Zero
// fields of cfg take DefaultConfig's values; Dev with no ID uses DevID.
func New(cfg Config) (*Server, error) {
	cfg = withDefaults(cfg)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("member", cfg.ID)
	s := &Server{
		cfg:     cfg,
		log:     log,
		stop:    make(chan struct{}),
		failedC: make(chan struct{}),
		obsCh:   make(chan raft.Observation, 64),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.leader = raftnode.NewLeadership()
	s.member.init()
	if err := s.open(); err != nil {
		s.cancel()
		s.closeResources()
		return nil, err
	}
	return s, nil
}

func withDefaults(cfg Config) Config {
	def := DefaultConfig()
	if cfg.Dev && cfg.ID == "" {
		cfg.ID = DevID
	}
	setIfZero(&cfg.RaftAddr, def.RaftAddr)
	setIfZero(&cfg.ClientAddr, def.ClientAddr)
	setIfZero(&cfg.HTTPAddr, def.HTTPAddr)
	if cfg.Limits == (namespace.Limits{}) {
		cfg.Limits = def.Limits
	}
	setIfZero(&cfg.HeartbeatTimeout, def.HeartbeatTimeout)
	setIfZero(&cfg.ElectionTimeout, def.ElectionTimeout)
	setIfZero(&cfg.LeaderLeaseTimeout, def.LeaderLeaseTimeout)
	setIfZero(&cfg.CommitTimeout, def.CommitTimeout)
	setIfZero(&cfg.MaxAppendEntries, def.MaxAppendEntries)
	setIfZero(&cfg.SnapshotThreshold, def.SnapshotThreshold)
	setIfZero(&cfg.SnapshotInterval, def.SnapshotInterval)
	setIfZero(&cfg.TrailingLogs, def.TrailingLogs)
	setIfZero(&cfg.SnapshotRetain, def.SnapshotRetain)
	setIfZero(&cfg.ApplyTimeout, def.ApplyTimeout)
	setIfZero(&cfg.HashCheckInterval, def.HashCheckInterval)
	setIfZero(&cfg.MinFreeSpace, def.MinFreeSpace)
	setIfZero(&cfg.StorageStallTimeout, def.StorageStallTimeout)
	frontDefaults(&cfg)
	if cfg.Clock == nil {
		cfg.Clock = def.Clock
	}
	if cfg.Monotonic == nil {
		cfg.Monotonic = def.Monotonic
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg
}

func setIfZero[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

// open creates the data dir layout, opens the stores and binds listeners.
func (s *Server) open() error {
	cfg := &s.cfg
	for _, dir := range []string{cfg.DataDir, s.dir("raft-wal"), s.dir("fsm")} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("latch: create data dir: %w", err)
		}
	}
	raftnode.RemoveSpools(cfg.DataDir)
	var err error
	// The raft log was a badger store in <data-dir>/raft before the WAL;
	// OpenWAL moves such a log over once.
	s.raftStore, err = raftstore.OpenWAL(raftstore.WALConfig{Dir: s.dir("raft-wal"), MigrateFrom: s.dir("raft"), Logger: raftnode.NewHCLog(s.log, "raft-wal")})
	if errors.Is(err, raftstore.ErrCorruptLog) {
		// A damaged raft log is damaged data like a damaged store: the
		// member refuses to start (latchd says so and exits 1).
		return fmt.Errorf("%w: %w", namespace.ErrStorage, err)
	}
	if err != nil {
		return err
	}
	if s.logs, err = raft.NewLogCache(512, s.raftStore); err != nil {
		return fmt.Errorf("latch: raft log cache: %w", err)
	}
	s.store, err = store.Open(store.Config{Dir: s.dir("fsm"), Logger: s.log})
	if err != nil {
		return err
	}
	// FileSnapshotStore keeps its files in <DataDir>/snapshots.
	s.snaps, err = raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, cfg.SnapshotRetain, raftnode.NewHCLog(s.log, "snapshots"))
	if err != nil {
		return fmt.Errorf("latch: snapshot store: %w", err)
	}

	mtls, err := s.loadMemberTLS()
	if err != nil {
		return err
	}
	if err := s.newRaftTransport(mtls); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("latch: admin http on %s: %w", cfg.HTTPAddr, err)
	}
	s.httpLn = tls.NewListener(ln, mtls.AdminServer())
	s.memberTLS = mtls
	s.httpAddr = cfg.HTTPAdvertise
	if s.httpAddr == "" {
		s.httpAddr = s.httpLn.Addr().String()
	}
	s.clock = clock.New(cfg.Clock, cfg.Monotonic, s.store.Clock())
	registerIntegrityMetrics()
	s.hashes = raftnode.NewHashChecker(raftnode.HashCheckConfig{
		Self: cfg.ID, Log: s.log, Ctx: s.ctx, Go: s.goFunc, Fail: s.fail, Members: s.store.Members, PeerAdmin: s.peerAdmin,
		Matches:    hashChecksTotal.WithLabelValues(cfg.ID, "match"),
		Mismatches: hashChecksTotal.WithLabelValues(cfg.ID, "mismatch"),
		Differing:  hashMismatchGauge.WithLabelValues(cfg.ID),
	})
	s.disk = raftnode.NewDiskGuard(raftnode.DiskGuardConfig{
		Dir: cfg.DataDir, MinFree: cfg.MinFreeSpace, Log: s.log, NoSpace: noSpaceGauge.WithLabelValues(cfg.ID), Stop: s.stop,
	})
	s.disk.Check()
	s.handOff = raftnode.NewHandOff(raftnode.HandOffConfig{
		Self: cfg.ID, Log: s.log, Ctx: s.ctx, Go: s.goFunc, ElectionTimeout: cfg.ElectionTimeout,
		AdminAddr: func(id string) string { return s.memberInfo(id).HTTPAddr }, PeerAdmin: s.peerAdmin,
	})
	s.fsm = raftnode.NewFSM(raftnode.FSMConfig{
		Store: s.store, Observer: cfg.Observer, Log: s.log, Clock: s.clock,
		HashView: s.hashes.Take, WaitSpace: s.disk.Wait, SpoolDir: cfg.DataDir, OwnLimits: cfg.Limits,
	})
	if err := s.openFront(); err != nil {
		return err
	}
	if err := s.openAPI(); err != nil {
		return err
	}
	s.metrics = newServerMetrics(s)
	memberFailedGauge.WithLabelValues(cfg.ID).Set(0)
	noSpaceGauge.WithLabelValues(cfg.ID).Set(0)
	hashMismatchGauge.WithLabelValues(cfg.ID).Set(0)
	return nil
}

func (s *Server) dir(name string) string { return filepath.Join(s.cfg.DataDir, name) }

// SetObserver sets the observer of applied batches. Call before Start.
func (s *Server) SetObserver(o ApplyObserver) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		panic("latch: SetObserver after Start")
	}
	s.cfg.Observer = o
	s.fsm.SetObserver(s.applyObservers(o))
}

// Start starts raft, bootstraps a new cluster when configured to, and starts
// the membership loop and the admin HTTP server.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.started {
		return nil
	}
	hasState, err := raft.HasExistingState(s.logs, s.raftStore, s.snaps)
	if err != nil {
		return fmt.Errorf("latch: read raft state: %w", err)
	}
	s.hadState = hasState
	if len(s.cfg.Recover) > 0 {
		if err := s.recoverCluster(); err != nil {
			return err
		}
	}
	r, err := raft.NewRaft(s.raftConfig(), s.fsm, s.logs, s.raftStore, s.snaps, s.trans)
	if err != nil {
		return fmt.Errorf("latch: start raft: %w", err)
	}
	s.raft = r
	s.crash.SetRaft(r)
	s.handOff.SetRaft(r)
	s.leader.SetRaft(r)
	s.goFunc(s.crash.Run)
	s.goFunc(func() { s.crash.WatchStall(s.cfg.HeartbeatTimeout) })
	s.started = true
	if !hasState {
		if peers := s.initialPeers(); len(peers) > 0 {
			err := r.BootstrapCluster(raft.Configuration{Servers: peers}).Error()
			if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
				return fmt.Errorf("latch: bootstrap: %w", err)
			}
		}
	}
	s.observer = raft.NewObserver(s.obsCh, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.RaftState:
			return true
		}
		return false
	})
	r.RegisterObserver(s.observer)

	s.httpSrv = &http.Server{
		Handler: s.adminHandler(), ReadHeaderTimeout: 10 * time.Second,
		// TLS handshake failures (scanners, clients of another CA) at debug.
		ErrorLog: slog.NewLogLogger(s.log.With("component", "admin-http").Handler(), slog.LevelDebug),
	}
	s.goFunc(func() {
		if err := s.httpSrv.Serve(s.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("admin http stopped", "err", err)
		}
	})
	s.goFunc(s.watchStorage)
	s.goFunc(func() { s.hashes.Loop(s.cfg.HashCheckInterval, s.cfg.ApplyTimeout, s) })
	s.goFunc(func() { s.disk.Loop(s.diskPolled) })
	s.goFunc(func() {
		raftnode.WatchWrites(s.stop, s.cfg.StorageStallTimeout, s.dir("raft-wal"), s.raftStore.PendingWrite, s.fail)
	})
	s.goFunc(s.leadershipLoop)
	s.goFunc(s.memberLoop)
	s.startFront()
	s.startAPI()
	s.log.Info("member started", "raft_addr", s.raftAddr, "http_addr", s.httpAddr, "api_addr", s.apiAddr(),
		"client_addr", s.cfg.ClientAddr, "existing_state", hasState, "applied_index", s.store.AppliedIndex())
	return nil
}

// BootstrapCluster makes this started member, which must hold no raft
// state, a founding member of a cluster of peers (which must include it).
// It is the programmatic form of Config.Bootstrap, for callers that learn
// the peers' addresses only after binding them (tests on port 0). Every
// founding member may call it with the same list; a member that already
// has state returns nil.
func (s *Server) BootstrapCluster(peers []Peer) error {
	if err := s.running(); err != nil {
		return err
	}
	c := s.cfg
	c.Bootstrap, c.Join, c.Dev = peers, "", false
	if err := c.Validate(); err != nil {
		return err
	}
	servers := make([]raft.Server, 0, len(peers))
	for _, p := range peers {
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
	}
	err := s.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("latch: bootstrap: %w", err)
	}
	return nil
}

// recoverCluster rewrites the raft configuration to Config.Recover before
// raft starts: the way out of a quorum lost for good (members destroyed,
// or voters added that never existed). The namespace keeps everything this
// member applied; entries it holds but never saw committed are applied
// too, as raft's recovery does.
func (s *Server) recoverCluster() error {
	servers := make([]raft.Server, 0, len(s.cfg.Recover))
	for _, p := range s.cfg.Recover {
		addr := p.RaftAddr
		if p.ID == s.cfg.ID {
			addr = s.raftAddr
		}
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(addr)})
	}
	s.log.Warn("recovering the raft configuration: this member's view of the cluster is replaced", "peers", s.cfg.Recover)
	err := raft.RecoverCluster(s.raftConfig(), s.fsm, s.logs, s.raftStore, s.snaps, s.trans, raft.Configuration{Servers: servers})
	if err != nil {
		return fmt.Errorf("latch: recover: %w", err)
	}
	s.log.Warn("raft configuration recovered; start without --recover from now on", "applied_index", s.store.AppliedIndex())
	return nil
}

func (s *Server) initialPeers() []raft.Server {
	if s.cfg.Dev {
		return []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(s.cfg.ID), Address: raft.ServerAddress(s.raftAddr)}}
	}
	var peers []raft.Server
	for _, p := range s.cfg.Bootstrap {
		addr := p.RaftAddr
		if p.ID == s.cfg.ID {
			addr = s.raftAddr
		}
		peers = append(peers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(addr)})
	}
	return peers
}

func (s *Server) raftConfig() *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(s.cfg.ID)
	c.HeartbeatTimeout = s.cfg.HeartbeatTimeout
	c.ElectionTimeout = s.cfg.ElectionTimeout
	c.LeaderLeaseTimeout = s.cfg.LeaderLeaseTimeout
	c.CommitTimeout = s.cfg.CommitTimeout
	c.MaxAppendEntries = s.cfg.MaxAppendEntries
	c.BatchApplyCh = true
	c.SnapshotThreshold = s.cfg.SnapshotThreshold
	c.SnapshotInterval = s.cfg.SnapshotInterval
	c.TrailingLogs = s.cfg.TrailingLogs
	// The namespace is durable and resumes from its own applied index; raft
	// only needs the snapshot's metadata on start.
	c.NoSnapshotRestoreOnStart = true
	c.NoLegacyTelemetry = true
	c.Logger = raftnode.NewHCLog(s.log, "raft")
	return c
}

// goFunc runs f as an owned goroutine that Close waits for.
func (s *Server) goFunc(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// Close stops the member: background loops, the admin server, raft, the
// transport and both stores. It is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return s.closeErr
	}
	s.closed = true
	s.mu.Unlock()
	// A planned stop (SIGTERM, a deploy) hands leadership over first: the
	// clients move to the successor while this member still answers, and
	// no election timeout is waited out.
	s.handOver("the member is stopping")
	s.mu.Lock()
	close(s.stop)
	s.cancel()
	s.mu.Unlock()
	s.closeFront() // clients hear ConnShutdown before raft goes away
	s.closeAPI()

	var errs []error
	if s.raft != nil {
		s.raft.DeregisterObserver(s.observer)
		// Shutting raft down first fails every future a loop or handler is
		// waiting on, so the waits below end promptly.
		if err := s.raft.Shutdown().Error(); err != nil {
			errs = append(errs, fmt.Errorf("latch: raft shutdown: %w", err))
		}
	}
	if s.httpSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.httpSrv.Shutdown(ctx); err != nil {
			s.httpSrv.Close()
		}
		cancel()
	}
	s.wg.Wait()
	s.leader.CloseAll()
	errs = append(errs, s.closeResources())
	s.metrics.unregister()
	s.closeErr = errors.Join(errs...)
	s.log.Info("member stopped")
	return s.closeErr
}

// handOver hands leadership over before this member stops (Close, a
// storage fault), then closes the client connections with ConnNotLeader:
// clients find the new leader while this member still answers probes.
func (s *Server) handOver(reason string) {
	if s.handOff.BeforeStop(reason) && s.front != nil {
		s.front.dropClients(session.ConnNotLeader, "leadership handed over: this member is stopping")
	}
}

// diskPolled is the disk guard's poll (raftnode.DiskGuard.Loop): a full
// leader hands leadership over, one hand-over at a time.
func (s *Server) diskPolled(full bool) {
	switch {
	case !full:
		s.handOff.Reset()
	case s.raft.State() == raft.Leader:
		s.handOff.Start("disk full")
	}
}

// closeResources closes whatever open managed to open.
func (s *Server) closeResources() error {
	var errs []error
	s.closeFront()
	if s.api != nil && s.api.srv == nil {
		s.api.ln.Close()
	}
	if s.httpLn != nil && s.httpSrv == nil {
		s.httpLn.Close()
	}
	if s.trans != nil {
		// Close alone leaves pooled outbound connections (and the peers'
		// handlers reading them) open.
		s.trans.CloseStreams()
		errs = append(errs, s.trans.Close())
	}
	if s.store != nil {
		errs = append(errs, s.store.Close())
	}
	if s.raftStore != nil {
		errs = append(errs, s.raftStore.Close())
	}
	return errors.Join(errs...)
}

// ID returns this member's id.
func (s *Server) ID() string { return s.cfg.ID }

// RaftAddr returns the raft address other members dial.
func (s *Server) RaftAddr() string { return s.raftAddr }

// HTTPAddr returns the admin HTTP address other members use.
func (s *Server) HTTPAddr() string { return s.httpAddr }

// ClientAddr returns the client address this member publishes.
func (s *Server) ClientAddr() string { return s.cfg.ClientAddr }

// Store returns the namespace for reads. Writes go through Propose.
func (s *Server) Store() *store.Store { return s.store }

// ApplyTimeout is how long Propose waits for raft by default.
func (s *Server) ApplyTimeout() time.Duration { return s.cfg.ApplyTimeout }

// running reports whether Start ran and Close did not.
func (s *Server) running() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return ErrClosed
	case !s.started:
		return ErrNotStarted
	case s.failErr != nil:
		return s.failErr
	}
	return nil
}
