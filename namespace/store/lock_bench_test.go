package store

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
)

// benchShapes are the states the release benchmarks compare. The first two
// hold the same number of sessions, nodes and lock requests, so badger and
// the Go heap are the same size and only the waiters on the released lock
// differ: the cost of a release must not grow with them. The third shows
// what the size of the whole store costs (badger's lookups are O(log n)).
var benchShapes = []struct{ waiters, others int }{{10, 9_990}, {10_000, 0}, {10, 0}}

// BenchmarkLockRelease measures release-to-next-grant through ApplyBatch on
// a real on-disk store: one exclusive lock with N waiters (one session
// each), next to unrelated held locks. A timed batch of 8 releases (each
// grants the next waiter) alternates with an untimed batch in which the
// released sessions queue again, so the queue stays N long.
func BenchmarkLockRelease(b *testing.B) {
	const batchSize = 8 // at most the shortest queue
	for _, shape := range benchShapes {
		b.Run(fmt.Sprintf("waiters=%d/others=%d", shape.waiters, shape.others), func(b *testing.B) {
			s := openTestStore(b)
			q, idx := fillLockQueue(b, s, shape.waiters, shape.others)
			cmds := make([]namespace.Command, batchSize)
			batch := make([]namespace.BatchEntry, 0, batchSize)
			apply := func(wantGrants int) {
				for j, r := range s.ApplyBatch(batch) {
					if r.Err != nil || len(r.Grants) != wantGrants {
						b.Fatalf("entry %d: %v, %d grants", batch[j].Index, r.Err, len(r.Grants))
					}
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; {
				batch = batch[:0]
				var released []uint64
				for ; i < b.N && len(batch) < batchSize; i++ {
					h := q.pop()
					cmds[len(batch)] = namespace.Command{Op: namespace.OpLockRelease, Session: h.session, Path: h.node}
					batch = append(batch, namespace.BatchEntry{Index: idx, Time: int64(idx), Cmd: &cmds[len(batch)]})
					idx++
					released = append(released, h.session)
				}
				apply(1)
				b.StopTimer()
				batch = batch[:0]
				for j, session := range released {
					cmds[j] = namespace.Command{Op: namespace.OpLockRequest, Session: session, Path: "/bench"}
					batch = append(batch, namespace.BatchEntry{Index: idx, Time: int64(idx), Cmd: &cmds[j]})
					idx++
					q.push(session)
				}
				apply(0)
				b.StartTimer()
			}
		})
	}
}

// BenchmarkLockIndexRelease is the same cycle on the lock index alone,
// without badger: the algorithm's own cost per release.
func BenchmarkLockIndexRelease(b *testing.B) {
	for _, shape := range benchShapes {
		n := shape.waiters
		b.Run(fmt.Sprintf("waiters=%d/others=%d", n, shape.others), func(b *testing.B) {
			ix := newLockIndex()
			rev := uint64(1)
			add := func(session uint64, path string) *lockReq {
				q := &lockReq{rev: rev, node: fmt.Sprintf("%s/lock-x-%010d", path, rev), session: session}
				rev++
				ix.add(q)
				return q
			}
			for i := range shape.others {
				add(uint64(n+2+i), fmt.Sprintf("/other/%d", i))
			}
			fifo := make([]*lockReq, 0, n+1)
			for i := range n + 1 {
				fifo = append(fifo, add(uint64(i+1), "/bench"))
			}
			grantAll(ix)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				h := fifo[0]
				fifo = append(fifo[1:], nil)
				ix.remove(h)
				if grantAll(ix) != 1 {
					b.Fatal("a release must grant exactly the next waiter")
				}
				fifo[len(fifo)-1] = add(h.session, "/bench")
			}
		})
	}
}

func grantAll(ix *lockIndex) int {
	n := 0
	for {
		_, q, ok := ix.pending.min()
		if !ok {
			return n
		}
		ix.grant(q, q.rev, 0)
		n++
	}
}

// lockQueue tracks the benchmark queue's order: node names follow the lock
// path's sequential counter.
type lockQueue struct {
	seq   int
	order []benchHolder
}

type benchHolder struct {
	session uint64
	node    string
}

func (q *lockQueue) push(session uint64) {
	q.order = append(q.order, benchHolder{session, fmt.Sprintf("/bench/lock-x-%010d", q.seq)})
	q.seq++
}

func (q *lockQueue) pop() benchHolder {
	h := q.order[0]
	q.order = q.order[1:]
	return h
}

// fillLockQueue opens n+1 sessions and queues an exclusive request of each
// on /bench, the first holding it; then others sessions each hold a lock
// on their own /other/i.
func fillLockQueue(b *testing.B, s *Store, n, others int) (*lockQueue, uint64) {
	q := &lockQueue{}
	idx := uint64(1)
	var batch []namespace.BatchEntry
	flush := func() {
		for _, r := range s.ApplyBatch(batch) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		batch = batch[:0]
	}
	for i := range n + 1 {
		session := idx
		batch = append(batch,
			namespace.BatchEntry{Index: idx, Time: int64(idx), Cmd: &namespace.Command{Op: namespace.OpSessionOpen, TTLMillis: 10_000}},
			namespace.BatchEntry{Index: idx + 1, Time: int64(idx + 1), Cmd: &namespace.Command{Op: namespace.OpLockRequest, Session: session, Path: "/bench"}})
		idx += 2
		q.push(session)
		if len(batch) >= 512 || i == n {
			flush()
		}
	}
	for i := range others {
		batch = append(batch,
			namespace.BatchEntry{Index: idx, Time: int64(idx), Cmd: &namespace.Command{Op: namespace.OpSessionOpen, TTLMillis: 10_000}},
			namespace.BatchEntry{Index: idx + 1, Time: int64(idx + 1), Cmd: &namespace.Command{Op: namespace.OpLockRequest, Session: idx, Path: fmt.Sprintf("/other/%d", i)}})
		idx += 2
		if len(batch) >= 512 || i == others-1 {
			flush()
		}
	}
	return q, idx
}

// BenchmarkLockContended is `latch bench contended --random`'s load on the
// state machine: 64 sessions (ACLs enforced, the default history bound)
// take a random one of 8 locks and release it at once, again and again.
// Each batch holds what every session has to say after the last one: a
// request from each idle session, a release (OpLockCancel, as the client's
// Unlock sends) from each holder. ns/op is per applied command.
func BenchmarkLockContended(b *testing.B) {
	const sessions, locks = 64, 8
	s := openTestStore(b)
	idx := uint64(1)
	apply := func(batch []namespace.BatchEntry) []*namespace.Result {
		rs := s.ApplyBatch(batch)
		for i, r := range rs {
			if r.Err != nil {
				b.Fatalf("entry %d (%v): %v", batch[i].Index, batch[i].Cmd.Op, r.Err)
			}
		}
		return rs
	}
	entry := func(cmd *namespace.Command) namespace.BatchEntry {
		idx++
		return namespace.BatchEntry{Index: idx, Time: int64(idx) * 1e5, Cmd: cmd}
	}
	apply([]namespace.BatchEntry{entry(&namespace.Command{Op: namespace.OpACLBootstrap, ACLDefault: namespace.PermAll})})
	type member struct {
		id   uint64
		node string // the request, once queued
		held bool
		reqs int
	}
	ms := make([]*member, sessions)
	var batch []namespace.BatchEntry
	for i := range ms {
		e := entry(&namespace.Command{Op: namespace.OpSessionOpen, TTLMillis: 10_000})
		ms[i] = &member{id: e.Index}
		batch = append(batch, e)
	}
	apply(batch)
	byNode := map[string]*member{}
	rng := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	for n := 0; n < b.N; {
		batch = batch[:0]
		var requesters []*member
		for _, m := range ms {
			switch {
			case m.node == "":
				m.reqs++
				batch = append(batch, entry(&namespace.Command{Op: namespace.OpLockRequest, Session: m.id,
					Path: fmt.Sprintf("/contended/l%d", rng.IntN(locks)), RequestID: fmt.Sprintf("r%d", m.reqs)}))
				requesters = append(requesters, m)
			case m.held:
				batch = append(batch, entry(&namespace.Command{Op: namespace.OpLockCancel, Session: m.id, Path: m.node}))
				delete(byNode, m.node)
				m.node, m.held = "", false
			}
		}
		n += len(batch)
		j := 0
		for i, r := range apply(batch) {
			if batch[i].Cmd.Op == namespace.OpLockRequest {
				m := requesters[j]
				j++
				m.node = r.Path
				byNode[m.node] = m
			}
			for _, g := range r.Grants {
				byNode[g.Node].held = true
			}
		}
	}
}

// reportCPU starts counting the process's CPU time (badger's goroutines
// included, which a 2-core machine pays for as much as the apply path);
// the function it returns reports it per op as cpu-ns/op.
func reportCPU(b *testing.B) func() {
	start := processCPU(b)
	return func() {
		b.ReportMetric(float64(processCPU(b)-start)/float64(b.N), "cpu-ns/op")
	}
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
