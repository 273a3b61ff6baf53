package lease

import (
	"fmt"
)

// Session caps' names: the latchd flags that set them, named in a
// refusal, and the metric labels of their use and refusals.
const (
	CapSessions            = "max-sessions"
	CapSessionsPerIdentity = "max-sessions-per-identity"
	CapAnonymousSessions   = "max-anonymous-sessions-per-host"
)

// QuotaKey is what a session counts against: its identity, or for the
// empty identity (clients without a certificate, which all share it) the
// client's host, so that one anonymous client cannot use up the sessions
// of every other one. Keys of hosts start with a NUL, which no identity
// has.
func QuotaKey(identity, host string) string {
	if identity == "" {
		return "\x00" + host
	}
	return identity
}

// isHost reports whether a quota key is a host's (QuotaKey).
func isHost(key string) bool { return key != "" && key[0] == 0 }

// sessionCap picks the cap of a quota key.
func (c *Config) sessionCap(key string) (name string, limit int) {
	if isHost(key) {
		return CapAnonymousSessions, c.MaxAnonymousSessions
	}
	return CapSessionsPerIdentity, c.MaxSessionsPerIdentity
}

// SessionUse returns the sessions open or opening in all, those of the
// busiest identity with a certificate, and those of the busiest host
// without one.
func (k *Keeper) SessionUse() (total, busiest, anonymous int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, n := range k.count {
		if isHost(key) {
			anonymous = max(anonymous, n+k.pending[key])
		} else {
			busiest = max(busiest, n+k.pending[key])
		}
	}
	return len(k.identity) + k.pendingAll, busiest, anonymous
}

// Reserve takes a slot for a session of identity, failing with
// session.ErrTooManySessions (Parts.Refuse), naming the cap, when the
// cluster has MaxSessions or the identity its cap (MaxSessionsPerIdentity,
// MaxAnonymousSessions for "") open or being opened. secret names the
// open (the secret it proposes): Opened with it turns the slot into an
// open session. The release func gives a slot back that Opened did not
// take.
func (k *Keeper) Reserve(identity, host string, secret []byte) (release func(), err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	cfg := &k.cfg
	if total := len(k.identity) + k.pendingAll; total >= cfg.MaxSessions {
		return nil, k.refuse(CapSessions, cfg.MaxSessions, "the cluster")
	}
	key := QuotaKey(identity, host)
	name, limit := cfg.sessionCap(key)
	if k.count[key]+k.pending[key] >= limit {
		who := fmt.Sprintf("identity %q", identity)
		if identity == "" {
			who = fmt.Sprintf("clients without a certificate on host %s (present one for your identity's own quota)", host)
		}
		return nil, k.refuse(name, limit, who)
	}
	k.pending[key]++
	k.pendingAll++
	k.reserved[string(secret)] = key
	return func() {
		k.mu.Lock()
		k.unreserve(secret)
		k.mu.Unlock()
	}, nil
}

// unreserve gives back the slot of the open named by secret, if it still
// holds one. The caller holds k.mu.
func (k *Keeper) unreserve(secret []byte) {
	key, ok := k.reserved[string(secret)]
	if !ok {
		return
	}
	delete(k.reserved, string(secret))
	if k.pending[key]--; k.pending[key] <= 0 {
		delete(k.pending, key)
	}
	k.pendingAll--
}
