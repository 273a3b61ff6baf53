package store

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/latch-io/latch/namespace"
)

// lockModel is the reference for the lock semantics: a flat list of
// requests, and the grant rule checked over all pairs (O(n²)) after every
// command. It shares nothing with the store's index.
type lockModel struct {
	reqs     []*modelReq // by revision
	sessions map[uint64]bool
	ending   map[uint64]bool // ended sessions with requests left: true when expired
	clock    int64
	limits   namespace.Limits
}

type modelReq struct {
	rev       uint64
	node      string
	path      string
	mode      namespace.LockMode
	session   uint64
	ttl       int64
	delay     int64
	granted   bool
	token     uint64
	grantTime int64
	deadline  int64
	phantom   bool
	delayEnd  int64
}

func (m *lockModel) conflict(a, b *modelReq) bool {
	return !(a.mode == namespace.LockShared && b.mode == namespace.LockShared) && related(a.path, b.path)
}

func (m *lockModel) runnable(q *modelReq) bool {
	for _, o := range m.reqs {
		if o.rev < q.rev && m.conflict(o, q) {
			return false
		}
	}
	return true
}

func (m *lockModel) live(node string) *modelReq {
	for _, q := range m.reqs {
		if !q.phantom && q.node == node {
			return q
		}
	}
	return nil
}

func (m *lockModel) drop(q *modelReq) {
	m.reqs = slices.DeleteFunc(m.reqs, func(o *modelReq) bool { return o == q })
}

// lose removes a held request, or turns it into a phantom when lock-delay
// applies.
func (m *lockModel) lose(q *modelReq, now int64, delayApplies bool) {
	if q.granted && delayApplies && q.delay > 0 {
		q.phantom, q.deadline, q.delayEnd = true, 0, addMillis(now, q.delay)
		return
	}
	m.drop(q)
}

// apply predicts cmd's outcome: the sentinel it fails with (nil for
// success) and the grants, as "rev" strings in order.
func (m *lockModel) apply(index uint64, leaderTime int64, cmd *namespace.Command, nodeOf func() string) (error, []uint64) {
	now := max(m.clock, leaderTime)
	var err error
	switch cmd.Op {
	case namespace.OpSessionOpen:
		m.sessions[index] = true
	case namespace.OpSessionClose, namespace.OpSessionExpire:
		ids := cmd.Sessions
		if cmd.Op == namespace.OpSessionClose {
			if !m.sessions[cmd.Session] {
				return namespace.ErrNoSession, nil
			}
			ids = []uint64{cmd.Session}
		}
		budget := m.limits.MaxLockBatch
		for _, id := range ids {
			if !m.sessions[id] {
				continue
			}
			delete(m.sessions, id)
			if m.endChunk(id, now, cmd.Op == namespace.OpSessionExpire, &budget) {
				m.ending[id] = cmd.Op == namespace.OpSessionExpire
			}
		}
	case namespace.OpLockRequest:
		if !m.sessions[cmd.Session] {
			return namespace.ErrNoSession, nil
		}
		q := &modelReq{rev: index, path: cmd.Path, mode: cmd.Mode, session: cmd.Session, ttl: cmd.HoldTTLMillis}
		for _, o := range m.reqs {
			if !o.phantom && o.session == cmd.Session && m.conflict(o, q) {
				return namespace.ErrWouldDeadlock, nil
			}
		}
		switch q.delay = cmd.LockDelayMillis; q.delay {
		case namespace.NoLockDelay:
			q.delay = 0
		case 0:
			q.delay = m.limits.DefaultLockDelayMillis
		}
		q.delay = min(q.delay, m.limits.MaxLockDelayMillis)
		q.node = nodeOf()
		m.reqs = append(m.reqs, q)
	case namespace.OpLockCancel, namespace.OpLockRelease, namespace.OpLockRenew, namespace.OpDelete:
		q := m.live(cmd.Path)
		switch {
		case q == nil && cmd.Op == namespace.OpDelete:
			return namespace.ErrNoNode, nil
		case q == nil:
			return namespace.ErrNoLock, nil
		case cmd.Op == namespace.OpDelete:
			m.drop(q)
		case q.session != cmd.Session:
			return namespace.ErrNotLockOwner, nil
		case cmd.Op == namespace.OpLockCancel:
			m.drop(q)
		case !q.granted:
			return namespace.ErrLockNotHeld, nil
		case cmd.Op == namespace.OpLockRelease:
			m.drop(q)
		case q.ttl == 0:
		case q.deadline <= now:
			return namespace.ErrLockNotHeld, nil
		default:
			q.deadline = addMillis(now, q.ttl)
		}
	case namespace.OpNoop:
		var due []*modelReq
		for _, q := range m.reqs {
			if (q.phantom && q.delayEnd <= now) || (!q.phantom && q.deadline != 0 && q.deadline <= now) {
				due = append(due, q)
			}
		}
		when := func(q *modelReq) int64 {
			if q.phantom {
				return q.delayEnd
			}
			return q.deadline
		}
		sort.Slice(due, func(i, j int) bool {
			a, b := due[i], due[j]
			return when(a) < when(b) || (when(a) == when(b) && a.rev < b.rev)
		})
		for i, q := range due {
			if i == m.limits.MaxLockBatch {
				break
			}
			if q.phantom {
				m.drop(q)
			} else {
				m.lose(q, now, true)
			}
		}
		budget := m.limits.MaxLockBatch
		for _, id := range slices.Sorted(maps.Keys(m.ending)) {
			if budget == 0 {
				break
			}
			if !m.endChunk(id, now, m.ending[id], &budget) {
				delete(m.ending, id)
			}
		}
	default:
		err = fmt.Errorf("model: op %s", cmd.Op)
	}
	m.clock = now
	var grants []uint64
	for _, q := range m.reqs {
		if len(grants) == m.limits.MaxLockBatch {
			break
		}
		if !q.granted && m.runnable(q) {
			q.granted, q.token, q.grantTime = true, index, now
			if q.ttl > 0 {
				q.deadline = addMillis(now, q.ttl)
			}
			grants = append(grants, q.rev)
		}
	}
	return err, grants
}

// endChunk ends up to *budget of session id's live requests in node order
// (the ephemeral index's key order) and reports whether any are left.
func (m *lockModel) endChunk(id uint64, now int64, expired bool, budget *int) bool {
	var mine []*modelReq
	for _, q := range m.reqs {
		if !q.phantom && q.session == id {
			mine = append(mine, q)
		}
	}
	slices.SortFunc(mine, func(a, b *modelReq) int { return strings.Compare(a.node, b.node) })
	for _, q := range mine {
		if *budget == 0 {
			return true
		}
		m.lose(q, now, expired)
		*budget--
	}
	return false
}

func (q *modelReq) info() namespace.LockInfo {
	return namespace.LockInfo{
		Node: q.node, Path: q.path, Mode: q.mode, Session: q.session, Rev: q.rev,
		HoldTTLMillis: q.ttl, LockDelayMillis: q.delay, Granted: q.granted, Token: q.token,
		GrantTime: q.grantTime, Deadline: q.deadline, Phantom: q.phantom, DelayEnd: q.delayEnd,
	}
}

var modelPaths = []string{"/a", "/a/b", "/a/c", "/a/b/d", "/a/b/e", "/a/c/f", "/g", "/"}

// lockWorkload drives a store and its model with random lock traffic.
type lockWorkload struct {
	t     testing.TB
	rng   *rand.Rand
	s     *Store
	m     *lockModel
	index uint64
	now   int64
	log   []namespace.BatchEntry // every command applied, for replaying elsewhere

	lastToken map[string]uint64 // by lock path
}

func newLockWorkload(t testing.TB, seed uint64, limits namespace.Limits) *lockWorkload {
	s, err := Open(Config{Dir: t.TempDir(), Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &lockWorkload{
		t: t, rng: rand.New(rand.NewPCG(seed, seed*31+7)), s: s,
		m:     &lockModel{sessions: map[uint64]bool{}, ending: map[uint64]bool{}, limits: limits},
		index: 0, now: 1_000_000_000, lastToken: map[string]uint64{},
	}
}

// next builds a random command.
func (w *lockWorkload) next() *namespace.Command {
	rng, m := w.rng, w.m
	var open []uint64
	for id := range m.sessions {
		open = append(open, id)
	}
	slices.Sort(open)
	session := func() uint64 {
		if len(open) == 0 || rng.IntN(20) == 0 {
			return uint64(rng.IntN(int(w.index + 2)))
		}
		return open[rng.IntN(len(open))]
	}
	var live []*modelReq
	for _, q := range m.reqs {
		if !q.phantom {
			live = append(live, q)
		}
	}
	target := func(op namespace.Op) *namespace.Command {
		if len(live) == 0 || rng.IntN(25) == 0 {
			return &namespace.Command{Op: op, Path: "/a/lock-x-0000009999", Session: session()}
		}
		q := live[rng.IntN(len(live))]
		c := &namespace.Command{Op: op, Path: q.node, Session: q.session}
		if rng.IntN(15) == 0 {
			c.Session = session()
		}
		return c
	}
	switch r := rng.IntN(100); {
	case r < 6 || len(open) < 2:
		if len(open) >= 6 {
			return &namespace.Command{Op: namespace.OpNoop}
		}
		return &namespace.Command{Op: namespace.OpSessionOpen, TTLMillis: 10_000}
	case r < 40:
		c := &namespace.Command{Op: namespace.OpLockRequest, Session: session(), Path: modelPaths[rng.IntN(len(modelPaths)-1)]}
		if rng.IntN(40) == 0 {
			c.Path = "/"
		}
		if rng.IntN(2) == 0 {
			c.Mode = namespace.LockShared
		}
		if rng.IntN(5) == 0 {
			c.HoldTTLMillis = 1 + int64(rng.IntN(4000))
		}
		switch rng.IntN(4) {
		case 0:
			c.LockDelayMillis = namespace.NoLockDelay
		case 1:
			c.LockDelayMillis = int64(rng.IntN(4000))
		}
		return c
	case r < 52:
		return target(namespace.OpLockRelease)
	case r < 60:
		return target(namespace.OpLockCancel)
	case r < 65:
		return target(namespace.OpLockRenew)
	case r < 68:
		c := target(namespace.OpDelete)
		c.Version, c.Session = namespace.AnyVersion, 0
		return c
	case r < 72:
		return &namespace.Command{Op: namespace.OpSessionClose, Session: session()}
	case r < 78:
		c := &namespace.Command{Op: namespace.OpSessionExpire}
		for range 1 + rng.IntN(2) {
			c.Sessions = append(c.Sessions, session())
		}
		return c
	default:
		return &namespace.Command{Op: namespace.OpNoop}
	}
}

// step applies one random command to the store and the model and checks
// that they agree, and that every grant's token exceeds the tokens of all
// earlier grants on its path (grants by one command share theirs).
func (w *lockWorkload) step() {
	t := w.t
	cmd := w.next()
	w.index += 1 + uint64(w.rng.IntN(10)/9)
	w.now += int64(w.rng.IntN(700)) * 1_000_000
	r := w.s.Apply(w.index, w.now, cmd)
	w.log = append(w.log, namespace.BatchEntry{Index: w.index, Time: w.now, Cmd: cmd})
	wantErr, wantGrants := w.m.apply(w.index, w.now, cmd, func() string { return r.Path })
	if r.Err != nil && !errors.Is(r.Err, wantErr) || r.Err == nil && wantErr != nil {
		t.Fatalf("index %d %s %+v: err %v, model says %v", w.index, cmd.Op, cmd, r.Err, wantErr)
	}
	if r.Err != nil {
		return
	}
	var got []uint64
	for _, g := range r.Grants {
		if g.Token != w.index || g.Token <= w.lastToken[g.Path] {
			t.Fatalf("index %d: grant %+v; last token on its path %d", w.index, g, w.lastToken[g.Path])
		}
		li, err := w.s.Lock(g.Node)
		if err != nil || li.Rev == 0 {
			t.Fatalf("index %d: granted node %s: %v", w.index, g.Node, err)
		}
		got = append(got, li.Rev)
	}
	for _, g := range r.Grants {
		w.lastToken[g.Path] = g.Token
	}
	if !slices.Equal(got, wantGrants) {
		t.Fatalf("index %d %s %+v: granted %v, model grants %v", w.index, cmd.Op, cmd, got, wantGrants)
	}
	granted := 0
	for _, ev := range r.Events {
		if ev.Type == namespace.EventLockGranted {
			granted++
		}
	}
	if granted != len(r.Grants) {
		t.Fatalf("index %d: %d grants, %d grant events", w.index, len(r.Grants), granted)
	}
}

// check compares the store's queues with the model's and checks mutual
// exclusion on what the store reports.
func (w *lockWorkload) check() {
	t := w.t
	var held []namespace.LockInfo
	for _, p := range modelPaths {
		got, err := w.s.LockQueue(p)
		if err != nil {
			t.Fatal(err)
		}
		var want []namespace.LockInfo
		for _, q := range w.m.reqs {
			if q.path == p {
				want = append(want, q.info())
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("index %d: queue %s\n got %+v\nwant %+v", w.index, p, got, want)
		}
		for _, li := range got {
			if li.Granted {
				held = append(held, li)
			}
			if !li.Phantom {
				if one, err := w.s.Lock(li.Node); err != nil || one != li {
					t.Fatalf("Lock(%s) = %+v, %v; queue says %+v", li.Node, one, err, li)
				}
			}
		}
	}
	for i, a := range held {
		for _, b := range held[i+1:] {
			if related(a.Path, b.Path) && (a.Mode == namespace.LockExclusive || b.Mode == namespace.LockExclusive) {
				t.Fatalf("index %d: conflicting grants held together: %+v and %+v", w.index, a, b)
			}
		}
	}
	checkLockIndex(t, w.s)
}

// checkLockIndex rebuilds the index from badger and compares it with the
// live one: records, derived pending set, frontiers, timers and subtree
// sets must all match.
func checkLockIndex(t testing.TB, s *Store) {
	t.Helper()
	var fresh *lockIndex
	err := s.db.View(func(txn *badger.Txn) (err error) {
		fresh, err = loadLockIndex(txn, s.locks.clock.Load())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := describeLockIndex(s.locks), describeLockIndex(fresh); got != want {
		t.Fatalf("live lock index differs from one rebuilt from badger:\n%s\n--- rebuilt\n%s", got, want)
	}
}

func describeLockIndex(ix *lockIndex) string {
	var b strings.Builder
	var reqs []*lockReq
	for _, lp := range ix.paths {
		for e := lp.queue.Front(); e != nil; e = e.Next() {
			reqs = append(reqs, reqOf(e))
		}
	}
	slices.SortFunc(reqs, func(a, b *lockReq) int { return int(a.rev) - int(b.rev) })
	for _, q := range reqs {
		fmt.Fprintf(&b, "req %+v pending=%t timer=%t/%v\n", q.info(), q.pending, q.hasTimer, q.timer)
		if !q.phantom && ix.byNode[q.node] != q {
			fmt.Fprintf(&b, "  not in byNode\n")
		}
		if !q.phantom && !slices.Contains(ix.bySession[q.session], q) {
			fmt.Fprintf(&b, "  not in bySession\n")
		}
	}
	var paths []string
	for p := range ix.paths {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	revsOf := func(s *lockSet) []uint64 {
		var out []uint64
		s.ascend(setKey{}, func(k setKey, q *lockReq) bool { out = append(out, k.a, k.b, q.rev); return true })
		return out
	}
	for _, p := range paths {
		lp := ix.paths[p]
		f := uint64(0)
		if lp.frontier != nil {
			f = lp.frontier.rev
		}
		fmt.Fprintf(&b, "path %s children=%d queue=%d sub=%d subX=%d frontier=%d below=%v\n",
			p, lp.children, lp.queue.Len(), lp.sub.Len(), lp.subX.Len(), f, revsOf(&lp.below))
	}
	fmt.Fprintf(&b, "pending=%v timers=%v nodes=%d sessions=%d\n", revsOf(&ix.pending), revsOf(&ix.timers), len(ix.byNode), len(ix.bySession))
	return b.String()
}

func modelLimits(batch int) namespace.Limits {
	l := namespace.DefaultLimits()
	l.MaxLockBatch = batch
	l.DefaultLockDelayMillis = 800
	l.MaxLockDelayMillis = 1500
	return l
}

// TestLockModel runs random lock traffic against the store and the
// reference model, comparing them after every command.
func TestLockModel(t *testing.T) {
	steps, longQueue := 4000, "queue length 10"
	if testing.Short() || raceEnabled {
		steps, longQueue = 1500, "queue length 5"
	}
	for _, tc := range []struct {
		seed  uint64
		batch int
	}{{1, 1000}, {2, 1000}, {3, 1000}, {4, 2}, {5, 1}} {
		t.Run(fmt.Sprintf("seed=%d/batch=%d", tc.seed, tc.batch), func(t *testing.T) {
			w := newLockWorkload(t, tc.seed, modelLimits(tc.batch))
			seen := map[string]int{}
			for i := range steps {
				w.step()
				w.check()
				if i%100 == 0 {
					checkReadCache(t, w.s)
					// Every state the traffic reaches is one a restore
					// accepts (snapshotcheck.go).
					if _, err := CheckSnapshot(bytes.NewReader(snapshotBytes(t, w.s))); err != nil {
						t.Fatalf("step %d: CheckSnapshot refuses a state the store reached: %v", i, err)
					}
				}
				for _, q := range w.m.reqs {
					switch {
					case q.phantom:
						seen["phantom"]++
					case q.granted && q.mode == namespace.LockShared:
						seen["shared held"]++
					case q.granted:
						seen["exclusive held"]++
					default:
						seen["waiting"]++
					}
				}
				seen[fmt.Sprintf("queue length %d", min(len(w.m.reqs)/5*5, 15))]++
			}
			// The traffic must reach the interesting states.
			for _, k := range []string{"phantom", "shared held", "exclusive held", "waiting", longQueue} {
				if seen[k] == 0 {
					t.Errorf("never saw %q: %v", k, seen)
				}
			}
		})
	}
}

// TestLockDeterminism replays one random lock log on other stores: applied
// in random batches with a tiny transaction budget, across a restart, and
// through a snapshot; all must end in the same bytes.
func TestLockDeterminism(t *testing.T) {
	limits := modelLimits(3)
	w := newLockWorkload(t, 42, limits)
	for range 2000 {
		w.step()
	}
	want, wantRaw := dump(t, w.s), rawListing(t, w.s)
	if !strings.Contains(want, " phantom ") || !strings.Contains(want, " waiting") {
		t.Fatalf("final state lacks phantoms or waiters; make the log richer:\n%s", want)
	}
	log := w.log

	open := func(dir string) *Store {
		s, err := Open(Config{Dir: dir, Limits: limits})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	split := open(t.TempDir())
	defer split.Close()
	split.maxTxnCount, split.maxTxnBytes = 7, 600
	applyInBatches(split, log, 9)

	dir := t.TempDir()
	restarted := open(dir)
	applyInBatches(restarted, log[:len(log)/2], 10)
	restarted.Close()
	restarted = open(dir)
	defer restarted.Close()
	checkLockIndex(t, restarted)
	applyInBatches(restarted, log[len(log)/2:], 11)

	src := open(t.TempDir())
	defer src.Close()
	applyInBatches(src, log[:len(log)/3], 12)
	state := snapshotBytes(t, src)
	restored := open(t.TempDir())
	defer restored.Close()
	applyInBatches(restored, randomLog(5, 200), 13) // state the restore must replace
	if err := restored.Restore(bytes.NewReader(state)); err != nil {
		t.Fatal(err)
	}
	if got, want := dump(t, restored), dump(t, src); got != want {
		t.Fatalf("restored dump differs:\n%s\n---\n%s", got, want)
	}
	checkLockIndex(t, restored)
	applyInBatches(restored, log[len(log)/3:], 14)

	for name, s := range map[string]*Store{"split": split, "restarted": restarted, "restored": restored} {
		if got := dump(t, s); got != want {
			t.Fatalf("%s: dump differs:\n%s\n---\n%s", name, got, want)
		}
		if got := rawListing(t, s); got != wantRaw {
			t.Fatalf("%s: raw listing differs", name)
		}
		checkLockIndex(t, s)
		if a, aok := s.NextTimer(); true {
			if b, bok := w.s.NextTimer(); a != b || aok != bok {
				t.Fatalf("%s: NextTimer %d,%t; want %d,%t", name, a, aok, b, bok)
			}
		}
	}
}
