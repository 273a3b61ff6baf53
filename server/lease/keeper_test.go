package lease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

var errDeposed = errors.New("test: not the leader")

// member is the member a keeper under test works through: leadership, a
// session table and a log the test holds, admission signals it sets, and
// a clock it moves. Its log applies expiry commands at once.
type member struct {
	clock *session.ManualClock

	mu       sync.Mutex
	term     uint64
	leading  bool
	sessions map[uint64]namespace.SessionInfo
	restores uint64
	index    uint64
	fail     []error // the next Proposes fail with these, in order
	// Admission control, on its own clock (admissionNow): when it last
	// refused a client for load, whether it refuses continuously (storm),
	// and whether a handshake is in flight.
	refusedAt   time.Time
	storm       bool
	handshaking bool

	expired chan []uint64 // the sessions of each committed expiry
}

func newTestKeeper(cfg Config) (*Keeper, *member) {
	m := &member{
		clock:    session.NewManualClock(time.Unix(1_000_000, 0)),
		term:     1,
		leading:  true,
		sessions: map[uint64]namespace.SessionInfo{},
		expired:  make(chan []uint64, 100),
	}
	k := New(cfg, Parts{
		Clock: m.clock, Leader: m, Store: m, Proposer: m, Admission: m,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Refuse: func(name string, limit int, who string) error {
			return fmt.Errorf("%w: %s reached the cap of %d (latchd --%s)", session.ErrTooManySessions, who, limit, name)
		},
	})
	return k, m
}

func (m *member) Term() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.term
}

func (m *member) IsLeader() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.leading
}

func (m *member) Leading() error {
	if !m.IsLeader() {
		return errDeposed
	}
	return nil
}

func (m *member) Session(id uint64) (namespace.SessionInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	si, ok := m.sessions[id]
	if !ok {
		return si, namespace.ErrNoSession
	}
	return si, nil
}

func (m *member) Sessions() ([]namespace.SessionInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var all []namespace.SessionInfo
	for _, si := range m.sessions {
		all = append(all, si)
	}
	return all, nil
}

func (m *member) Restores() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.restores
}

func (m *member) Propose(_ context.Context, cmd *namespace.Command) (*namespace.Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.fail) > 0 {
		err := m.fail[0]
		m.fail = m.fail[1:]
		return nil, err
	}
	if cmd.Op != namespace.OpSessionExpire {
		return nil, fmt.Errorf("test: unexpected command %v", cmd.Op)
	}
	m.index++
	for _, id := range cmd.Sessions {
		delete(m.sessions, id)
	}
	m.expired <- slices.Clone(cmd.Sessions)
	return &namespace.Result{Index: m.index}, nil
}

func (m *member) Deposed(err error) bool { return errors.Is(err, errDeposed) }

// admissionNow is admission control's clock: the wall clock, decades
// away from the keeper's monotonic one, moving with it.
func (m *member) admissionNow() time.Time { return m.clock.Now().Add(56 * 365 * 24 * time.Hour) }

func (m *member) RefusedWithin(d time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.storm || !m.refusedAt.IsZero() && m.admissionNow().Sub(m.refusedAt) < d
}

func (m *member) TakingIn(d time.Duration) bool {
	m.mu.Lock()
	handshaking := m.handshaking
	m.mu.Unlock()
	return handshaking || m.RefusedWithin(d)
}

// refuse records a refusal for load now, ago before now.
func (m *member) refuse(ago time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refusedAt = m.admissionNow().Add(-ago)
}

// open adds a session with ttl to the member's table.
func (m *member) open(id uint64, ttl time.Duration, identity string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sessions[id] = namespace.SessionInfo{ID: id, TTLMillis: ttl.Milliseconds(), Identity: identity}
}

// committed returns the sessions expired so far (without waiting).
func (m *member) committed() []uint64 {
	var ids []uint64
	for {
		select {
		case got := <-m.expired:
			ids = append(ids, got...)
		default:
			slices.Sort(ids)
			return ids
		}
	}
}

var testConfig = Config{
	ExpiryTick: time.Millisecond, ExpiryBatch: 2, ApplyTimeout: time.Second,
	MaxReconnectGrace: 45 * time.Second, MaxSessions: 100, MaxSessionsPerIdentity: 100, MaxAnonymousSessions: 100,
}

// reapAt moves the clock to since after start, reaps once, and returns
// what was expired.
func reapAt(t *testing.T, k *Keeper, m *member, start time.Time, since time.Duration) []uint64 {
	t.Helper()
	m.clock.Advance(start.Add(since).Sub(m.clock.Now()))
	if !k.reap(context.Background()) {
		t.Fatalf("at %v: reap says this member can no longer propose", since)
	}
	return m.committed()
}

// A loaded table gives every session a full TTL from the load, whatever
// its deadline was under the old leader; a renewal moves the deadline; an
// expiry commits in batches of ExpiryBatch and forgets the sessions.
func TestKeeperFullTTLFromLoad(t *testing.T) {
	k, m := newTestKeeper(testConfig)
	for id := uint64(1); id <= 3; id++ {
		m.open(id, time.Second, "alice")
	}
	m.open(4, 3*time.Second, "bob")
	m.clock.Advance(time.Hour) // the old leader's deadlines are long past
	start := m.clock.Now()
	if err := k.load(); err != nil {
		t.Fatal(err)
	}
	if err := k.Serving(); err != nil {
		t.Fatalf("loaded: %v", err)
	}
	if got := reapAt(t, k, m, start, 999*time.Millisecond); got != nil {
		t.Fatalf("expired %v before their TTL from the load", got)
	}
	if _, ok := k.Renew(3); !ok {
		t.Fatal("renew of a live session refused")
	}
	if got := reapAt(t, k, m, start, time.Second); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("at the TTL: expired %v, want [1 2] (3 was renewed)", got)
	}
	if _, ok := k.Renew(1); ok {
		t.Fatal("an expired session renewed")
	}
	if total, busiest, _ := k.SessionUse(); total != 2 || busiest != 1 {
		t.Fatalf("after the expiry: %d sessions counted (busiest identity %d), want 2 (1)", total, busiest)
	}
	if got := reapAt(t, k, m, start, 1998*time.Millisecond); got != nil {
		t.Fatalf("expired %v before the renewed TTL", got)
	}
	if got := reapAt(t, k, m, start, 3*time.Second); !slices.Equal(got, []uint64{3, 4}) {
		t.Fatalf("at 3s: expired %v, want [3 4]", got)
	}
	if k.Sessions() != 0 {
		t.Fatalf("%d leases left", k.Sessions())
	}
}

// A new leader adds the reconnect grace (twice the time admitting one
// connection per session takes at HandshakeRate) to every first lease,
// and while admission control says a storm is being taken in it expires
// nothing, up to MaxReconnectGrace after the load; in steady state while
// it refuses clients a session expires only MaxReconnectGrace past its
// deadline.
func TestKeeperReconnectHolds(t *testing.T) {
	cfg := testConfig
	cfg.HandshakeRate, cfg.MaxReconnectGrace = 2, 10*time.Second
	k, m := newTestKeeper(cfg)
	for id := uint64(1); id <= 4; id++ {
		m.open(id, time.Second, "")
	}
	start := m.clock.Now()
	if err := k.load(); err != nil {
		t.Fatal(err)
	}
	// Grace: 2 * 4 sessions / 2 per second = 4s on top of the TTL.
	if got := reapAt(t, k, m, start, 4999*time.Millisecond); got != nil {
		t.Fatalf("expired %v within TTL + grace", got)
	}
	// A refusal since the load, and handshakes going on: a storm.
	m.refuse(0)
	m.mu.Lock()
	m.handshaking = true
	m.mu.Unlock()
	if got := reapAt(t, k, m, start, 9999*time.Millisecond); got != nil {
		t.Fatalf("expired %v while a storm is taken in, within MaxReconnectGrace of the load", got)
	}
	if got := reapAt(t, k, m, start, 10*time.Second); len(got) != 4 {
		t.Fatalf("at MaxReconnectGrace after the load: expired %v, want all 4", got)
	}

	// Steady state, refusing for load: a session expires MaxReconnectGrace
	// past its deadline.
	m.mu.Lock()
	m.handshaking, m.storm = false, true
	m.mu.Unlock()
	k.Opened(5, time.Second, QuotaKey("", "h"), nil)
	opened := m.clock.Now()
	if got := reapAt(t, k, m, opened, 10*time.Second+999*time.Millisecond); got != nil {
		t.Fatalf("expired %v while refusing, before MaxReconnectGrace past the deadline", got)
	}
	if got := reapAt(t, k, m, opened, 11*time.Second); !slices.Equal(got, []uint64{5}) {
		t.Fatalf("MaxReconnectGrace past the deadline: expired %v, want [5]", got)
	}
}

// A refusal before the load (an overload long past) and handshakes that
// go on (ordinary traffic) are no storm: a new leader expires a session
// at its TTL from the load. Admission runs on another clock than the
// leases: the keeper must not compare its instants with the load's.
func TestKeeperOldRefusalHoldsNothing(t *testing.T) {
	k, m := newTestKeeper(testConfig)
	m.open(1, time.Second, "alice")
	m.refuse(time.Hour)
	m.mu.Lock()
	m.handshaking = true
	m.mu.Unlock()
	start := m.clock.Now()
	if err := k.load(); err != nil {
		t.Fatal(err)
	}
	if got := reapAt(t, k, m, start, time.Second); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("at the TTL, with no refusal since the load: expired %v, want [1]", got)
	}
}

// An expiry that did not commit puts its sessions back: they expire on
// the retry. One a deposed member could not propose stops the reaper
// with the sessions still due.
func TestKeeperExpiryRetries(t *testing.T) {
	k, m := newTestKeeper(testConfig)
	m.open(1, time.Second, "alice")
	start := m.clock.Now()
	if err := k.load(); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.fail = []error{errors.New("test: commit timed out")}
	m.mu.Unlock()
	if got := reapAt(t, k, m, start, time.Second); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("after a failed commit: expired %v, want [1] on the retry", got)
	}

	m.open(2, time.Second, "alice")
	k.Opened(2, time.Second, "alice", nil)
	m.mu.Lock()
	m.fail = []error{errDeposed}
	m.mu.Unlock()
	m.clock.Advance(time.Second)
	if k.reap(context.Background()) {
		t.Fatal("reap went on after Propose said the member was deposed")
	}
	if _, expiring, ok := k.table.Deadline(2); !ok || expiring {
		t.Fatalf("session 2 after a deposed expiry: known %v, expiring %v; want it due again", ok, expiring)
	}
}

// Lead serves once it loaded the term, expires sessions as the clock
// passes their deadline, and stops serving when the term ends. Applied
// starts the lease of a session the handler never reported and forgets
// one that closed.
func TestKeeperLead(t *testing.T) {
	k, m := newTestKeeper(testConfig)
	m.open(1, time.Second, "alice")
	if err := k.Serving(); !errors.Is(err, session.ErrNoLeader) {
		t.Fatalf("before the load: %v, want ErrNoLeader", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub := make(chan bool, 1)
	led := make(chan bool)
	go func() { led <- k.Lead(ctx, sub) }()
	eventually(t, "serving", k.Serving)

	m.open(2, 5*time.Second, "bob")
	k.Applied([]*namespace.Result{{Events: []namespace.Event{{Type: namespace.EventSessionOpened, Session: 2}}}})
	if !k.Has(2) {
		t.Fatal("no lease for a session opened without its handler")
	}
	m.clock.Advance(time.Second)
	select {
	case got := <-m.expired:
		if !slices.Equal(got, []uint64{1}) {
			t.Fatalf("expired %v, want [1]", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reaper did not expire a session past its deadline")
	}
	k.Applied([]*namespace.Result{{Events: []namespace.Event{{Type: namespace.EventSessionClosed, Session: 2}}}})
	if k.Has(2) {
		t.Fatal("a closed session kept its lease")
	}

	m.mu.Lock()
	m.leading = false
	m.mu.Unlock()
	sub <- false
	if <-led {
		t.Fatal("Lead says it leads after the term ended")
	}
	if err := k.Serving(); err == nil {
		t.Fatal("serving after the term ended")
	}
	m.mu.Lock()
	m.leading, m.term = true, 2
	m.mu.Unlock()
	if err := k.Serving(); !errors.Is(err, session.ErrNoLeader) {
		t.Fatalf("a new term not loaded yet: %v, want ErrNoLeader", err)
	}
}

// eventually polls f until it returns nil, failing after a deadline.
func eventually(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(time.Millisecond) // polling a condition with a deadline
	}
}
