package lease

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// Config is what a Keeper is set with (the member's Config fields of the
// same names).
type Config struct {
	// ExpiryTick is how often the reaper looks at least; ExpiryBatch the
	// most sessions one expiry command ends; ApplyTimeout how long it
	// waits for one to commit.
	ExpiryTick   time.Duration
	ExpiryBatch  int
	ApplyTimeout time.Duration
	// MaxReconnectGrace bounds both expiry holds (expiryCutoff);
	// HandshakeRate sizes a new leader's grace (reconnectGrace).
	MaxReconnectGrace time.Duration
	HandshakeRate     float64
	// The session caps (Reserve).
	MaxSessions            int
	MaxSessionsPerIdentity int
	MaxAnonymousSessions   int
}

// Keeper is the leader's view of sessions: their lease deadlines
// (session.LeaseTable, renewed by keepalives without touching the log),
// each session's quota key for the session caps, and the reaper that
// commits the expiry of sessions whose lease ran out. It serves only
// while this member is the ready leader and the table was loaded in its
// current term.
type Keeper struct {
	cfg    Config
	clock  session.Clock
	leader Leadership
	store  Store
	prop   Proposer
	adm    Admission
	log    *slog.Logger
	refuse func(name string, limit int, who string) error
	table  *session.LeaseTable

	mu       sync.Mutex
	ready    bool              // table loaded for term
	term     uint64            // leadership term the table was loaded in
	identity map[uint64]string // quota key of each session
	count    map[string]int    // open sessions per quota key
	pending  map[string]int    // opens in flight per quota key
	// pendingAll is the sum of pending.
	pendingAll int
	// reserved maps the secret of each open in flight to its quota key:
	// the first of Opened and the reservation's release to run moves it
	// out of pending, so a session that committed is never counted both
	// as open and as in flight.
	reserved map[string]string
	// restores is the store's snapshot-install count when the table was
	// loaded: a backup restored on the leader replaces the sessions, and
	// the table is loaded again.
	restores uint64
	// loadedAt is when the table was loaded (k.clock): expiry is held
	// while clients are still being taken in, up to MaxReconnectGrace
	// after it (expiryCutoff).
	loadedAt time.Time
}

// New returns a keeper that serves nothing until Lead loads a term.
func New(cfg Config, p Parts) *Keeper {
	return &Keeper{
		cfg:      cfg,
		clock:    p.Clock,
		leader:   p.Leader,
		store:    p.Store,
		prop:     p.Proposer,
		adm:      p.Admission,
		log:      p.Log,
		refuse:   p.Refuse,
		table:    session.NewLeaseTable(p.Clock),
		identity: map[uint64]string{},
		count:    map[string]int{},
		pending:  map[string]int{},
		reserved: map[string]string{},
	}
}

// Serving returns nil when session requests may be served here: this
// member is the ready leader and its lease table was reset in this term.
// A leader still loading answers session.ErrNoLeader, which clients
// retry.
func (k *Keeper) Serving() error {
	if err := k.leader.Leading(); err != nil {
		return err
	}
	term := k.leader.Term()
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.ready || k.term != term {
		return fmt.Errorf("%w: the new leader is loading sessions", session.ErrNoLeader)
	}
	return nil
}

// Opened starts the lease of a session whose open just committed, counted
// under quota key key (QuotaKey), and ends the reservation of its open
// (named by the session's secret) if this member made it. The observer
// (Applied) and the open handler both call it; the first one wins.
func (k *Keeper) Opened(id uint64, ttl time.Duration, key string, secret []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.unreserve(secret)
	if _, ok := k.identity[id]; ok {
		return
	}
	k.identity[id] = key
	k.count[key]++
	k.table.Add(id, ttl)
}

// gone forgets a session whose close or expiry was applied.
func (k *Keeper) gone(id uint64) {
	k.table.Remove(id)
	k.mu.Lock()
	defer k.mu.Unlock()
	key, ok := k.identity[id]
	if !ok {
		return
	}
	delete(k.identity, id)
	if k.count[key]--; k.count[key] <= 0 {
		delete(k.count, key)
	}
}

// Applied starts the leases of sessions a batch opened and forgets those it
// ended. It runs on the FSM goroutine of every member. Opens are handled
// here as well as by the open handler because a handler whose client went
// away never learns the id of a session that did commit: without a lease
// it would never expire. Only the serving leader reads the new sessions'
// TTLs; elsewhere this is a scan of the events.
func (k *Keeper) Applied(results []*namespace.Result) {
	for _, r := range results {
		for _, ev := range r.Events {
			switch ev.Type {
			case namespace.EventSessionOpened:
				if k.isReady() {
					if si, err := k.store.Session(ev.Session); err == nil {
						k.Opened(si.ID, time.Duration(si.TTLMillis)*time.Millisecond, QuotaKey(si.Identity, si.Host), si.Secret)
					}
				}
			case namespace.EventSessionClosed, namespace.EventSessionExpired:
				k.gone(ev.Session)
			}
		}
	}
}

func (k *Keeper) isReady() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.ready
}

// Renew extends id's lease by its TTL and returns the TTL; false when id
// is unknown or expiring.
func (k *Keeper) Renew(id uint64) (time.Duration, bool) { return k.table.Renew(id) }

// Retime restarts id's lease with a new TTL, one a committed command
// recorded (a lease-per-lock renewal); false when it is unknown or
// expiring.
func (k *Keeper) Retime(id uint64, ttl time.Duration) bool { return k.table.Retime(id, ttl) }

// ExpiresIn is the lease id has left as this member sees it (0 when it is
// not the serving leader or does not know id).
func (k *Keeper) ExpiresIn(id uint64) time.Duration {
	if k.Serving() != nil {
		return 0
	}
	deadline, _, ok := k.table.Deadline(id)
	if !ok {
		return 0
	}
	return max(deadline.Sub(k.clock.Now()), 0)
}

// Has reports whether the keeper holds a lease for id, serving or not.
func (k *Keeper) Has(id uint64) bool {
	_, _, ok := k.table.Deadline(id)
	return ok
}

// Sessions is the number of sessions whose leases this member keeps (0
// unless it is the serving leader).
func (k *Keeper) Sessions() int {
	if k.Serving() != nil {
		return 0
	}
	return k.table.Len()
}
