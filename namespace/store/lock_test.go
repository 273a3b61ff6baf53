package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/latch-io/latch/namespace"
)

// lockHarness applies commands at increasing indexes and fails the test on
// unexpected errors.
type lockHarness struct {
	t     testing.TB
	s     *Store
	index uint64
	now   int64
}

func newLockHarness(t testing.TB, limits namespace.Limits) *lockHarness {
	s, err := Open(Config{Dir: t.TempDir(), Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &lockHarness{t: t, s: s, now: 1_000_000_000}
}

func (h *lockHarness) apply(cmd *namespace.Command) *namespace.Result {
	h.t.Helper()
	h.index++
	h.now += 1_000_000
	r := h.s.Apply(h.index, h.now, cmd)
	if r.Err != nil {
		h.t.Fatalf("index %d %s %s: %v", h.index, cmd.Op, cmd.Path, r.Err)
	}
	return r
}

func (h *lockHarness) session() uint64 {
	return h.apply(&namespace.Command{Op: namespace.OpSessionOpen, TTLMillis: 10_000}).Session
}

func (h *lockHarness) lock(session uint64, path string, mode namespace.LockMode, mod func(*namespace.Command)) *namespace.Result {
	h.t.Helper()
	cmd := &namespace.Command{Op: namespace.OpLockRequest, Session: session, Path: path, Mode: mode}
	if mod != nil {
		mod(cmd)
	}
	return h.apply(cmd)
}

// lockScene builds a state in which ending one session touches many lock
// requests: session big holds /p/i (lock-delay on even i, none on odd
// ones) with a waiter from session w behind each, and waits on /q/i behind
// holder h, with a waiter from w behind it.
func lockScene(t testing.TB, s *Store) (big uint64, next uint64) {
	h := &lockHarness{t: t, s: s, now: 1_000_000_000}
	big, w, hq := h.session(), h.session(), h.session()
	for i := range 40 {
		delay := namespace.NoLockDelay
		if i%2 == 0 {
			delay = 5000
		}
		h.lock(big, fmt.Sprintf("/p/%d", i), namespace.LockExclusive, func(c *namespace.Command) { c.LockDelayMillis = delay })
		h.lock(w, fmt.Sprintf("/p/%d", i), namespace.LockExclusive, nil)
		h.lock(hq, fmt.Sprintf("/q/%d", i), namespace.LockExclusive, nil)
		h.lock(big, fmt.Sprintf("/q/%d", i), namespace.LockShared, nil)
		h.lock(w, fmt.Sprintf("/q/%d", i), namespace.LockShared, nil)
	}
	return big, h.index + 1
}

// TestLockSessionEndResumes crashes in the middle of expiring a session
// with many lock requests, after a checkpoint committed part of it; the
// replay after a restart must reach the state, and make the grants, of an
// uninterrupted run, because pending grants are derived from the records.
func TestLockSessionEndResumes(t *testing.T) {
	ref := openTestStore(t)
	ref.maxTxnCount = 40 // checkpoint every few ephemerals
	big, idx := lockScene(t, ref)
	expire := &namespace.Command{Op: namespace.OpSessionExpire, Sessions: []uint64{big}}
	want := ref.Apply(idx, 9_000_000_000, expire)
	if want.Err != nil || len(want.Grants) != 20 {
		t.Fatalf("uninterrupted expire: %v, %d grants; want 20 (the /p/i without lock-delay)", want.Err, len(want.Grants))
	}

	dir := t.TempDir()
	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s.maxTxnCount = 40
	lockScene(t, s)
	s.afterCheckpoint = func() error { return errors.New("simulated crash") }
	if r := s.Apply(idx, 9_000_000_000, expire); !errors.Is(r.Err, namespace.ErrStorage) {
		t.Fatalf("Apply = %v, want the simulated crash", r.Err)
	}
	s.Close()

	s, err = Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	left, _ := s.SessionEphemerals(big)
	if len(left) == 0 || len(left) == 80 {
		t.Fatalf("%d of 80 request nodes left: the crash was not mid-command", len(left))
	}
	checkLockIndex(t, s)
	if at, ok := s.NextTimer(); !ok || at > 9_000_000_000 {
		t.Fatalf("NextTimer after the crash = %d, %t; the runnable waiters must ask for a tick", at, ok)
	}
	got := s.Apply(idx, 9_000_000_000, expire)
	if got.Err != nil {
		t.Fatal(got.Err)
	}
	if !reflect.DeepEqual(got.Grants, want.Grants) {
		t.Fatalf("replay granted\n%+v\nuninterrupted run granted\n%+v", got.Grants, want.Grants)
	}
	if g, w := rawListing(t, s), rawListing(t, ref); g != w {
		t.Fatalf("resumed expire differs from an uninterrupted one:\n%s\n---\n%s", g, w)
	}
	checkLockIndex(t, s)
}

// TestLockTickBudget expires hundreds of holds at once on paths with large
// data: one tick may not do them all (its writes must fit a transaction),
// and ticks until NextTimer is quiet must release every one.
func TestLockTickBudget(t *testing.T) {
	l := namespace.DefaultLimits()
	l.DefaultLockDelayMillis = 0
	h := newLockHarness(t, l)
	s := h.session()
	const n = 600
	data := []byte(strings.Repeat("x", 3000))
	for i := range n {
		p := fmt.Sprintf("/big/%03d", i)
		if i == 0 {
			h.apply(&namespace.Command{Op: namespace.OpCreate, Path: "/big"})
		}
		h.apply(&namespace.Command{Op: namespace.OpCreate, Path: p, Data: data})
		h.lock(s, p, namespace.LockExclusive, func(c *namespace.Command) { c.HoldTTLMillis = 1000 })
	}
	h.now += 5_000_000_000
	lost, ticks := 0, 0
	for {
		at, ok := h.s.NextTimer()
		if !ok {
			break
		}
		if at > h.now {
			t.Fatalf("NextTimer %d is after now %d with %d locks left", at, h.now, n-lost)
		}
		r := h.apply(&namespace.Command{Op: namespace.OpNoop})
		ticks++
		for _, ev := range r.Events {
			if ev.Type == namespace.EventLockLost {
				lost++
			}
		}
	}
	t.Logf("%d holds released in %d ticks", lost, ticks)
	if lost != n || ticks < 2 {
		t.Fatalf("%d locks lost in %d ticks; want %d over several ticks", lost, ticks, n)
	}
	if eph, _ := h.s.SessionEphemerals(s); len(eph) != 0 {
		t.Fatalf("%d request nodes left", len(eph))
	}
}

// TestLockGrantBudget frees thousands of readers on a long path at once:
// the grants spread over several commands (MaxLockBatch and the byte
// budget), in revision order, each command's grants sharing its token.
func TestLockGrantBudget(t *testing.T) {
	h := newLockHarness(t, namespace.DefaultLimits())
	w, r := h.session(), h.session()
	path := "/" + strings.Repeat("p", 980)
	holder := h.lock(w, path, namespace.LockExclusive, nil).Path
	const n = 2000
	for range n {
		h.lock(r, path, namespace.LockShared, nil)
	}
	res := h.apply(&namespace.Command{Op: namespace.OpLockRelease, Session: w, Path: holder})
	var all []namespace.Grant
	commands := 0
	for {
		if len(res.Grants) > h.s.Limits().MaxLockBatch {
			t.Fatalf("one command granted %d", len(res.Grants))
		}
		if commands == 0 && (len(res.Grants) == 0 || len(res.Grants) >= h.s.Limits().MaxLockBatch) {
			t.Fatalf("the release granted %d; the byte budget should cut it below MaxLockBatch", len(res.Grants))
		}
		for _, g := range res.Grants {
			if g.Token != res.Index {
				t.Fatalf("grant %+v in command %d", g, res.Index)
			}
		}
		all = append(all, res.Grants...)
		commands++
		if _, ok := h.s.NextTimer(); !ok {
			break
		}
		res = h.apply(&namespace.Command{Op: namespace.OpNoop})
	}
	t.Logf("%d readers granted in %d commands", len(all), commands)
	if len(all) != n || commands < 3 {
		t.Fatalf("%d grants in %d commands; want %d in several", len(all), commands, n)
	}
	for i := 1; i < len(all); i++ {
		if all[i].Node <= all[i-1].Node { // sequential names follow revisions
			t.Fatalf("grant %d (%s) after %s: not in queue order", i, all[i].Node, all[i-1].Node)
		}
	}
}

func TestLockReadsAndErrors(t *testing.T) {
	h := newLockHarness(t, namespace.DefaultLimits())
	s := h.session()
	node := h.lock(s, "/r", namespace.LockShared, func(c *namespace.Command) { c.Data = []byte("v") }).Path
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"Lock bad path", func() error { _, err := h.s.Lock("nope"); return err }(), namespace.ErrBadPath},
		{"Lock not a request", func() error { _, err := h.s.Lock("/r"); return err }(), namespace.ErrNoLock},
		{"LockQueue bad path", func() error { _, err := h.s.LockQueue("/r/"); return err }(), namespace.ErrBadPath},
		{"CheckSequencer bad mode", func() error { _, err := h.s.CheckSequencer("/r", 7, 1, s); return err }(), namespace.ErrBadCommand},
		{"request bad mode", h.s.Apply(100, 0, &namespace.Command{Op: namespace.OpLockRequest, Session: s, Path: "/x", Mode: 9}).Err, namespace.ErrBadCommand},
		{"request huge TTL", h.s.Apply(101, 0, &namespace.Command{Op: namespace.OpLockRequest, Session: s, Path: "/x", HoldTTLMillis: 1 << 50}).Err, namespace.ErrBadCommand},
		{"request node too long", h.s.Apply(102, 0, &namespace.Command{Op: namespace.OpLockRequest, Session: s, Path: "/" + strings.Repeat("a", 1010)}).Err, namespace.ErrBadPath},
		{"release bad path", h.s.Apply(103, 0, &namespace.Command{Op: namespace.OpLockRelease, Session: s, Path: ""}).Err, namespace.ErrBadPath},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if q, err := h.s.LockQueue("/elsewhere"); err != nil || len(q) != 0 {
		t.Errorf("LockQueue of an unlocked path = %v, %v", q, err)
	}
	if ok, err := h.s.CheckSequencer("/r", namespace.LockShared, 2, s); !ok || err != nil {
		t.Errorf("CheckSequencer of the held lock = %t, %v", ok, err)
	}
	if data, _, _ := h.s.Get(node); string(data) != "v" {
		t.Errorf("request node data %q, want the request's Data", data)
	}
	if namespace.LockShared.String() != "shared" || namespace.LockExclusive.String() != "exclusive" || namespace.LockMode(9).String() != "mode(9)" {
		t.Error("LockMode names")
	}
	if namespace.OpLockRenew.String() != "lock-renew" || namespace.EventLockLost.String() != "lock-lost" {
		t.Error("op or event names")
	}

	h.s.Close()
	if _, err := h.s.Lock(node); !errors.Is(err, namespace.ErrClosed) {
		t.Errorf("Lock after Close = %v", err)
	}
	if _, ok := h.s.NextTimer(); ok {
		t.Error("NextTimer after Close reports a timer")
	}
}

func TestLockLimitsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*namespace.Limits)
	}{
		{"batch", func(l *namespace.Limits) { l.MaxLockBatch = 0 }},
		{"negative max delay", func(l *namespace.Limits) { l.MaxLockDelayMillis = -1 }},
		{"huge max delay", func(l *namespace.Limits) { l.MaxLockDelayMillis = 1 << 50 }},
		{"default above max", func(l *namespace.Limits) { l.DefaultLockDelayMillis = l.MaxLockDelayMillis + 1 }},
		{"negative default", func(l *namespace.Limits) { l.DefaultLockDelayMillis = -1 }},
	} {
		l := namespace.DefaultLimits()
		tc.mod(&l)
		if err := l.Validate(); !errors.Is(err, namespace.ErrBadLimits) {
			t.Errorf("%s: Validate = %v", tc.name, err)
		}
	}
	l := namespace.DefaultLimits()
	l.DefaultLockDelayMillis, l.MaxLockDelayMillis = 0, 0
	if err := l.Validate(); err != nil {
		t.Errorf("lock-delay off: %v", err)
	}
}

func TestLockEntryRoundTrip(t *testing.T) {
	e := &namespace.Entry{Time: 3, Cmd: namespace.Command{Op: namespace.OpLockRequest, Path: "/l", Session: 9, Mode: namespace.LockShared,
		HoldTTLMillis: 1500, LockDelayMillis: namespace.NoLockDelay, Data: []byte("me"), Version: namespace.AnyVersion}}
	b, err := namespace.EncodeEntry(e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := namespace.DecodeEntry(b)
	if err != nil || !reflect.DeepEqual(got, e) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
}

func TestLockSetOrder(t *testing.T) {
	var s lockSet
	keys := []int64{5, -3, 9, 0, -1 << 62, 1 << 62, 7}
	for i, k := range keys {
		s.insert(timeKey(k, uint64(i)), nil)
	}
	var got []int64
	s.ascend(setKey{}, func(k setKey, _ *lockReq) bool { got = append(got, keyTime(k)); return true })
	want := []int64{-1 << 62, -3, 0, 5, 7, 9, 1 << 62}
	if !reflect.DeepEqual(got, want) || s.len() != len(keys) {
		t.Fatalf("order %v, want %v", got, want)
	}
	if !s.delete(timeKey(5, 0)) || s.delete(timeKey(5, 0)) || s.len() != len(keys)-1 {
		t.Fatal("delete")
	}
	got = got[:0]
	s.ascend(timeKey(0, 3), func(k setKey, _ *lockReq) bool { got = append(got, keyTime(k)); return len(got) < 2 })
	if !reflect.DeepEqual(got, []int64{7, 9}) {
		t.Fatalf("ascend after 0: %v", got)
	}
	if addMillis(1<<62, 1<<60) != 1<<63-1 {
		t.Fatal("addMillis must saturate")
	}
}

// TestLockGarbage applies lock commands with random, often invalid, fields
// and extreme leader times: nothing may panic, and the index must always
// match what badger holds.
func TestLockGarbage(t *testing.T) {
	h := newLockHarness(t, namespace.DefaultLimits())
	sessions := []uint64{h.session(), h.session(), 0, 99}
	rng := rand.New(rand.NewPCG(77, 1))
	paths := []string{"/a", "/a/b", "", "a", "/a/", "/", "/a/lock-x-0000000000", "/a/b/lock-s-0000000001", "/\x00"}
	times := []int64{-1 << 63, -5, 0, 1 << 40, 1<<63 - 1, 1<<63 - 2_000_000}
	ops := []namespace.Op{namespace.OpLockRequest, namespace.OpLockCancel, namespace.OpLockRelease, namespace.OpLockRenew, namespace.OpNoop, namespace.OpDelete, namespace.OpSessionExpire}
	idx, grants := h.index, 0
	for range 1500 {
		idx++
		cmd := &namespace.Command{
			Op: ops[rng.IntN(len(ops))], Path: paths[rng.IntN(len(paths))], Mode: namespace.LockMode(rng.IntN(3)),
			Session:       sessions[rng.IntN(len(sessions))],
			HoldTTLMillis: []int64{0, 1, -1, 1 << 41, 50}[rng.IntN(5)], LockDelayMillis: []int64{0, -1, -2, 1 << 50, 10}[rng.IntN(5)],
			Version: namespace.AnyVersion,
		}
		if cmd.Op == namespace.OpSessionExpire && rng.IntN(10) != 0 {
			cmd.Op = namespace.OpNoop
		}
		if rng.IntN(2) == 0 { // plausible fields, so that the lock code runs
			cmd.Path = paths[rng.IntN(2)]
			cmd.Mode = namespace.LockMode(rng.IntN(2))
			cmd.Session = sessions[rng.IntN(2)]
			cmd.HoldTTLMillis, cmd.LockDelayMillis = int64(rng.IntN(2))*50, int64(rng.IntN(3))-1
			if cmd.Op != namespace.OpLockRequest {
				if reqs := h.s.locks.bySession[cmd.Session]; len(reqs) > 0 {
					cmd.Path = reqs[rng.IntN(len(reqs))].node
				}
			}
		}
		cmd.Sessions = []uint64{cmd.Session}
		r := h.s.Apply(idx, times[rng.IntN(len(times))], cmd)
		if errors.Is(r.Err, namespace.ErrStorage) {
			t.Fatalf("%+v: %v", cmd, r.Err)
		}
		grants += len(r.Grants)
		if cmd.Op == namespace.OpSessionExpire && r.Results[0].Err == nil {
			idx++
			opened := h.s.Apply(idx, 0, &namespace.Command{Op: namespace.OpSessionOpen, TTLMillis: 1000})
			sessions[slices.Index(sessions, cmd.Session)] = opened.Session
		}
		if idx%50 == 0 {
			checkLockIndex(t, h.s)
		}
	}
	checkLockIndex(t, h.s)
	if grants < 50 {
		t.Fatalf("only %d grants: the garbage is too bad to reach the lock code", grants)
	}
}

// TestLockConcurrentReads reads locks while lock traffic applies and a
// restore replaces the index; run with -race.
func TestLockConcurrentReads(t *testing.T) {
	w := newLockWorkload(t, 8, modelLimits(2))
	stop := readWhile(t, func() error {
		for _, p := range modelPaths {
			q, err := w.s.LockQueue(p)
			if err != nil {
				return err
			}
			for _, li := range q {
				w.s.Lock(li.Node)
				w.s.CheckSequencer(p, li.Mode, li.Token, li.Session)
			}
		}
		w.s.NextTimer()
		return w.s.Dump(io.Discard)
	})
	for i := range 600 {
		w.step()
		if i == 300 { // a restore swaps the index under the readers
			if err := w.s.Restore(bytes.NewReader(snapshotBytes(t, w.s))); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop()
	w.check()
}
