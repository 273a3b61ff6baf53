package server

import (
	"sync"
	"time"
)

// clusterClock is the cluster's time as this member knows it: the time the
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
type clusterClock struct {
	wall func() time.Time
	mono func() time.Duration

	mu   sync.Mutex
	base int64         // cluster time (unix ns) observed at at; 0: none yet
	at   time.Duration // monotonic reading when base was observed
}

func newClusterClock(wall func() time.Time, mono func() time.Duration, committed int64) *clusterClock {
	return &clusterClock{wall: wall, mono: mono, base: committed, at: mono()}
}

// now returns the cluster time, for stamping an entry or checking timers.
func (c *clusterClock) now() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.mono()
	if c.base == 0 {
		c.base, c.at = c.wall().UnixNano(), m
	}
	return c.base + int64(m-c.at)
}

// observe records that the log committed time t (applied just now). The
// clock moves forward to it when it was behind; it never moves back.
func (c *clusterClock) observe(t int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.mono()
	if c.base == 0 || t > c.base+int64(m-c.at) {
		c.base, c.at = t, m
	}
}

// monoTime presents a monotonic reading as a time.Time for the lease
// table, which only adds durations to it and compares, so a wall-clock
// step cannot end or extend a lease.
type monoTime func() time.Duration

var monoEpoch = time.Unix(0, 0)

func (m monoTime) Now() time.Time { return monoEpoch.Add(m()) }
