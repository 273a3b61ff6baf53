// Package clock holds a member's clocks: the cluster clock (Cluster), the
// time the leader stamps on log entries and lock timers are measured in,
// anchored to the log rather than to any member's wall clock; and Mono,
// a monotonic reading for tables that only add durations and compare.
// It reads no clock of its own: the member gives it the wall and
// monotonic clocks (Config.Clock, Config.Monotonic), and tests give it
// clocks they move.
package clock

import (
	"sync"
	"time"
)

// Cluster is the cluster's time as this member knows it: the time the
// leader stamps on entries, and the time lock timers (hold TTLs,
// lock-delays) are measured in. It is anchored to the log, not to this
// member's wall clock:
//
//   - It is the latest committed time this member applied, advanced by the
//     time elapsed since on this member's monotonic clock. So it never runs
//     behind what the log says, and a follower that becomes leader goes on
//     from where the old leader's entries left it, counting the election in
//     between on its own monotonic clock.
//   - A wall-clock step on any member (forward or back, NTP or an
//     operator) changes nothing: a hold TTL or lock-delay lasts its length
//     in real elapsed time, never shorter (a forward step used to end it
//     early) and never stalled (a new leader whose clock was behind used to
//     hold every timer until its clock caught up).
//   - The wall clock is read once in a cluster's life: when a leader must
//     stamp the first entry of a cluster that has no time yet.
//
// The price: time during which no member ran (a whole-cluster outage) is
// not counted, so after one the cluster's time (node ctime/mtime) lags the
// wall clock by the outage. Timers then last longer, never shorter; and
// sessions get a fresh full TTL from a new leader anyway.
type Cluster struct {
	wall func() time.Time
	mono func() time.Duration

	mu   sync.Mutex
	base int64         // cluster time (unix ns) observed at at; 0: none yet
	at   time.Duration // monotonic reading when base was observed
}

// New returns the cluster clock of a member that has applied committed
// (the latest committed time in its log; 0: none yet), reading the wall
// clock wall at most once and measuring elapsed time with mono.
func New(wall func() time.Time, mono func() time.Duration, committed int64) *Cluster {
	return &Cluster{wall: wall, mono: mono, base: committed, at: mono()}
}

// Now returns the cluster time (unix ns), for stamping an entry or
// checking timers.
func (c *Cluster) Now() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.mono()
	if c.base == 0 {
		c.base, c.at = c.wall().UnixNano(), m
	}
	return c.base + int64(m-c.at)
}

// Observe records that the log committed time t (applied just now). The
// clock moves forward to it when it was behind; it never moves back.
func (c *Cluster) Observe(t int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.mono()
	if c.base == 0 || t > c.base+int64(m-c.at) {
		c.base, c.at = t, m
	}
}

// Mono presents a monotonic reading as a time.Time for the lease table,
// which only adds durations to it and compares, so a wall-clock step
// cannot end or extend a lease.
type Mono func() time.Duration

var monoEpoch = time.Unix(0, 0)

// Now is the monotonic reading as a time after the Unix epoch.
func (m Mono) Now() time.Time { return monoEpoch.Add(m()) }
