package session

import (
	"container/heap"
	"sync"
	"time"
)

// LeaseTable holds the leader's in-memory session deadlines. Keepalives
// renew a lease here and never touch the raft log; the leader's reaper asks
// for the leases past their deadline and commits their expiry as one
// command per batch. Safe for concurrent use.
//
// A lease handed out by Expired is "expiring": Renew refuses it from then
// on, so a keepalive racing with the reaper can never be acknowledged for a
// session whose expiry is already on its way to the log.
type LeaseTable struct {
	clock Clock
	wake  chan struct{}

	mu    sync.Mutex
	byID  map[uint64]*lease
	queue leaseQueue // leases not expiring, earliest deadline first
}

type lease struct {
	id       uint64
	ttl      time.Duration
	deadline time.Time
	index    int // position in queue; -1 once expiring
}

// NewLeaseTable returns an empty table reading time from clock.
func NewLeaseTable(clock Clock) *LeaseTable {
	return &LeaseTable{clock: clock, wake: make(chan struct{}, 1), byID: make(map[uint64]*lease)}
}

// Add starts (or restarts) session id's lease: it ends ttl from now.
func (t *LeaseTable) Add(id uint64, ttl time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.addLocked(id, ttl, t.clock.Now().Add(ttl))
}

func (t *LeaseTable) addLocked(id uint64, ttl time.Duration, deadline time.Time) {
	l, ok := t.byID[id]
	if !ok {
		l = &lease{id: id, index: -1}
		t.byID[id] = l
	}
	l.ttl = ttl
	t.schedule(l, deadline)
}

// schedule sets l's deadline, (re)queueing it, and wakes the reaper when
// the earliest deadline moved earlier.
func (t *LeaseTable) schedule(l *lease, deadline time.Time) {
	earliest, had := t.peekLocked()
	l.deadline = deadline
	if l.index < 0 {
		heap.Push(&t.queue, l)
	} else {
		heap.Fix(&t.queue, l.index)
	}
	if !had || deadline.Before(earliest) {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

// Renew extends session id's lease to its TTL from now and returns that
// TTL. ok is false when the table does not know id or its expiry has
// begun (see Expired): the client must be told its session is gone.
func (t *LeaseTable) Renew(id uint64) (ttl time.Duration, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, found := t.byID[id]
	if !found || l.index < 0 {
		return 0, false
	}
	l.deadline = t.clock.Now().Add(l.ttl)
	heap.Fix(&t.queue, l.index)
	return l.ttl, true
}

// Retime gives session id a new TTL and restarts its lease with it. ok is
// false, as for Renew, when the table does not know id or its expiry has
// begun.
func (t *LeaseTable) Retime(id uint64, ttl time.Duration) (ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, found := t.byID[id]
	if !found || l.index < 0 {
		return false
	}
	l.ttl = ttl
	t.schedule(l, t.clock.Now().Add(ttl))
	return true
}

// Remove forgets session id: call it when its close or expiry is applied.
func (t *LeaseTable) Remove(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.byID[id]
	if !ok {
		return
	}
	delete(t.byID, id)
	if l.index >= 0 {
		heap.Remove(&t.queue, l.index)
	}
}

// ResetAll replaces the table with sessions (id → TTL), each given a full
// TTL plus grace from now. A new leader calls it before expiring anything:
// it cannot know when the old leader last renewed each session, so it
// grants every session the most it could have been promised, and grace
// for the time its clients need to reach it (Chubby's grace period): a
// client that is alive and reconnecting is not expired because thousands
// of others were admitted before it. The first renewal ends the grace.
func (t *LeaseTable) ResetAll(sessions map[uint64]time.Duration, grace time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byID = make(map[uint64]*lease, len(sessions))
	t.queue = make(leaseQueue, 0, len(sessions))
	now := t.clock.Now()
	for id, ttl := range sessions {
		t.addLocked(id, ttl, now.Add(ttl+grace))
	}
}

// Expired returns up to max sessions whose deadline has passed, earliest
// deadline first, and marks them expiring: Renew refuses them and Expired
// does not return them again. The caller commits their expiry and then
// calls Remove; if it cannot commit, Requeue hands them back. max <= 0
// means no bound.
func (t *LeaseTable) Expired(max int) []uint64 {
	return t.ExpiredBy(max, t.clock.Now())
}

// ExpiredBy is Expired for the sessions whose deadline is not after
// cutoff (a leader holding expiry for clients it refuses passes a cutoff
// before now).
func (t *LeaseTable) ExpiredBy(max int, cutoff time.Time) []uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := cutoff
	var ids []uint64
	for len(t.queue) > 0 && (max <= 0 || len(ids) < max) {
		l := t.queue[0]
		if l.deadline.After(now) {
			break
		}
		heap.Pop(&t.queue)
		ids = append(ids, l.id)
	}
	return ids
}

// Requeue returns expiring sessions (from Expired) whose expiry could not
// be committed to the schedule with their old deadline, so the next
// Expired call returns them again. Unknown or non-expiring ids are
// ignored.
func (t *LeaseTable) Requeue(ids []uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, id := range ids {
		if l, ok := t.byID[id]; ok && l.index < 0 {
			t.schedule(l, l.deadline)
		}
	}
}

// NextDeadline is the earliest deadline of a lease not yet expiring; ok is
// false when there is none. The reaper sleeps until then (or Wake).
func (t *LeaseTable) NextDeadline() (deadline time.Time, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.peekLocked()
}

func (t *LeaseTable) peekLocked() (time.Time, bool) {
	if len(t.queue) == 0 {
		return time.Time{}, false
	}
	return t.queue[0].deadline, true
}

// Deadline returns session id's current deadline; expiring reports that
// its expiry has begun. ok is false for an unknown id.
func (t *LeaseTable) Deadline(id uint64) (deadline time.Time, expiring, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.byID[id]
	if !ok {
		return time.Time{}, false, false
	}
	return l.deadline, l.index < 0, true
}

// Len is the number of sessions in the table, expiring ones included.
func (t *LeaseTable) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

// Wake receives a value when the earliest deadline moves earlier (a short
// lease was added, or leases were requeued): a reaper sleeping until the
// old NextDeadline should look again.
func (t *LeaseTable) Wake() <-chan struct{} { return t.wake }

// leaseQueue is a min-heap of leases by deadline (container/heap).
type leaseQueue []*lease

func (q leaseQueue) Len() int { return len(q) }

func (q leaseQueue) Less(i, j int) bool {
	if q[i].deadline.Equal(q[j].deadline) {
		return q[i].id < q[j].id // stable order for equal deadlines
	}
	return q[i].deadline.Before(q[j].deadline)
}

func (q leaseQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index = i
	q[j].index = j
}

func (q *leaseQueue) Push(x any) {
	l := x.(*lease)
	l.index = len(*q)
	*q = append(*q, l)
}

func (q *leaseQueue) Pop() any {
	old := *q
	n := len(old)
	l := old[n-1]
	old[n-1] = nil
	l.index = -1
	*q = old[:n-1]
	return l
}
