package watch

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// testLog is the applied log the test moves: its applied index and
// snapshot-install count.
type testLog struct{ applied, restores uint64 }

func (l *testLog) AppliedIndex() uint64 { return l.applied }
func (l *testLog) Restores() uint64     { return l.restores }

// hubWatch is a watcher under test and what it received.
type hubWatch struct {
	w    *Watcher
	from uint64 // the revision it started after
	at   uint64 // the hub's revision when it registered
	got  []session.WatchEvent
}

// drain takes what the hub queued for hw.
func (hw *hubWatch) drain(h *Hub) {
	evs, _ := h.Take(hw.w, nil)
	hw.got = append(hw.got, evs...)
}

// The hub against a model: random node events applied in batches while
// watchers of random kinds register at random points, some from past
// revisions. Each watcher must receive exactly the events of the full log
// that it wants, after its start, in order, once; or, when its start is
// older than the retained history, a Resync first and then exactly the
// events after the Resync's revision.
func TestWatchHubModel(t *testing.T) {
	var resyncs, replays int
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rs, rp := hubModel(t, seed)
			resyncs, replays = resyncs+rs, replays+rp
		})
	}
	if resyncs == 0 || replays == 0 {
		t.Fatalf("the model never exercised %d resyncs / %d replays", resyncs, replays)
	}
}

// hubModel runs one seed and returns how many watches resynced and how
// many replayed retained history.
func hubModel(t *testing.T, seed uint64) (resyncs, replays int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	paths := []string{"/", "/a", "/a/b", "/a/b/c", "/a/d", "/e", "/e/f"}
	types := []namespace.EventType{namespace.EventCreated, namespace.EventDeleted, namespace.EventDataChanged,
		namespace.EventChildrenChanged, namespace.EventSessionExpired, namespace.EventLockGranted, namespace.EventLockContended}
	kinds := []session.WatchKind{session.WatchData, session.WatchChildren, session.WatchExists,
		session.WatchData | session.WatchChildren, session.WatchRecursive, session.WatchRecursive | session.WatchData,
		session.WatchLocks, session.WatchLocks | session.WatchData, session.WatchRecursive | session.WatchLocks}
	history := 20 + rng.IntN(60)
	h := NewHub(Config{History: history, Buffer: 1 << 20}, &testLog{})

	var log []namespace.Event // every event applied
	var watches []*hubWatch
	rev := uint64(0)
	for step := 0; step < 300; step++ {
		if rng.IntN(4) == 0 {
			from := uint64(0)
			if rev > 0 && rng.IntN(2) == 0 {
				from = 1 + rng.Uint64N(rev)
			}
			w := NewWatcher(paths[rng.IntN(len(paths))], kinds[rng.IntN(len(kinds))], from, false, nil)
			start := h.Register(w)
			if from == 0 && start != rev || from != 0 && start != from {
				t.Fatalf("register from %d at rev %d: starts after %d", from, rev, start)
			}
			watches = append(watches, &hubWatch{w: w, from: start, at: rev})
		}
		// A batch of 1-3 commands with 0-4 events each; revisions skip
		// now and then (raft's own entries).
		var batch []*namespace.Result
		for range 1 + rng.IntN(3) {
			rev += 1 + uint64(rng.IntN(2))
			r := &namespace.Result{Index: rev}
			for range rng.IntN(5) {
				ev := namespace.Event{Type: types[rng.IntN(len(types))], Path: paths[rng.IntN(len(paths))], Rev: rev}
				switch {
				case ev.Type == namespace.EventSessionExpired:
					ev.Path = ""
				case ev.Type.IsLockEvent():
					ev.Path = namespace.Join(ev.Path, "lock-x-0000000001") // a request node
					ev.Session, ev.Lock = 9, &namespace.LockNote{Token: rev}
				}
				r.Events = append(r.Events, ev)
				log = append(log, ev)
			}
			batch = append(batch, r)
		}
		h.Applied(batch)
		if rng.IntN(3) == 0 && len(watches) > 0 {
			watches[rng.IntN(len(watches))].drain(h)
		}
	}
	for i, hw := range watches {
		hw.drain(h)
		after := hw.from
		got := hw.got
		if len(got) > 0 && got[0].Type == session.EventResync {
			after = got[0].Rev
			got = got[1:]
			resyncs++
		} else if len(got) > 0 && got[0].Rev <= hw.at {
			replays++ // its first event came from the history
		}
		var want []session.WatchEvent
		for j := range log {
			if ev := &log[j]; ev.Rev > after && ev.Path != "" && isWatchable(ev.Type) && hw.w.wants(ev) {
				want = append(want, wireEvent(ev))
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("watch %d (%s kind %b from %d):\n got %v\nwant %v", i, hw.w.path, hw.w.kind, hw.from, got, want)
		}
		if after != hw.from && hw.from >= h.base {
			t.Fatalf("watch %d resynced although its start %d is retained (base %d)", i, hw.from, h.base)
		}
	}
	return resyncs, replays
}

func TestWatchHubOverflowAndRestore(t *testing.T) {
	log := &testLog{applied: 10}
	h := NewHub(Config{History: 100, Buffer: 3}, log)
	ev := func(rev uint64, p string) *namespace.Result {
		return &namespace.Result{Index: rev, Events: []namespace.Event{{Type: namespace.EventDataChanged, Path: p, Rev: rev}}}
	}
	slow := NewWatcher("/a", session.WatchData, 0, false, nil)
	live := NewWatcher("/a", session.WatchData, 0, false, nil)
	h.Register(slow)
	h.Register(live)
	h.Applied([]*namespace.Result{ev(11, "/a"), ev(12, "/a")})
	var buf []session.WatchEvent
	buf, _ = h.Take(live, buf)
	if len(buf) != 2 {
		t.Fatalf("live watcher got %v", buf)
	}
	h.Applied([]*namespace.Result{ev(13, "/a"), ev(14, "/a")})
	// slow has 11..13 queued; 14 overflows it: Resync before its oldest.
	got, done := h.Take(slow, nil)
	if !done || len(got) != 1 || got[0].Type != session.EventResync || got[0].Rev != 10 {
		t.Fatalf("overflowed watcher: %v done=%v", got, done)
	}
	if h.Watchers() != 1 {
		t.Fatalf("%d watchers registered, want the live one", h.Watchers())
	}
	if got, _ := h.Take(live, nil); len(got) != 2 || got[1].Rev != 14 {
		t.Fatalf("live watcher got %v", got)
	}
	// A snapshot install: history is gone, live watchers resync at the
	// revision before the next applied command.
	log.restores, log.applied = 1, 50
	h.Applied([]*namespace.Result{ev(51, "/a")})
	got, done = h.Take(live, nil)
	if done || len(got) != 2 || got[0].Type != session.EventResync || got[0].Rev != 50 || got[1].Rev != 51 {
		t.Fatalf("after a restore: %v done=%v", got, done)
	}
	late := NewWatcher("/a", session.WatchData, 12, false, nil)
	if h.Register(late) != 12 {
		t.Fatal("start revision")
	}
	if got, _ := h.Take(late, nil); len(got) != 1 || got[0].Type != session.EventResync || got[0].Rev != 51 {
		t.Fatalf("watch from before the restore: %v", got)
	}
}

// The hub counts bytes (path + EventOverhead per event) for its
// total and per connection: a writer that takes again gives back what it
// took before (the HTTP API's writer never calls sent), a connection over
// its cap gets its watches resynced naming the cap while a watch of no
// connection goes on, and everything is given back at the end.
func TestWatchHubBytes(t *testing.T) {
	path := "/" + strings.Repeat("p", 99)
	size := len(path) + EventOverhead
	h := NewHub(Config{History: 100, Buffer: 1000, MaxBytesPerConn: 10 * size}, &testLog{})
	conn := &Budget{}
	a, b := NewWatcher(path, session.WatchData, 0, false, conn), NewWatcher(path, session.WatchData, 0, false, conn)
	api := NewWatcher(path, session.WatchData, 0, false, nil)
	for _, w := range []*Watcher{a, b, api} {
		h.Register(w)
	}
	rev := uint64(0)
	apply := func(n int) {
		for range n {
			rev++
			h.Applied([]*namespace.Result{{Index: rev, Events: []namespace.Event{{Type: namespace.EventDataChanged, Path: path, Rev: rev}}}})
		}
	}
	check := func(what string, total, perConn int) {
		t.Helper()
		if got, _, _ := h.BacklogStats(); got != total || conn.bytes != perConn {
			t.Fatalf("%s: hub holds %d bytes, connection %d; want %d and %d", what, got, conn.bytes, total, perConn)
		}
	}
	apply(3)
	check("3 events for 3 watches", 9*size, 6*size)
	got, _ := h.Take(a, nil)
	h.Sent(a, got[:1])
	check("a sent 1 of the 3 it took", 8*size, 5*size)
	h.Take(a, got)
	check("a took again", 6*size, 3*size)
	evs, _ := h.Take(api, nil)
	apply(1)
	h.Take(api, evs) // no sent: the API's writer
	check("api took twice without sent", 6*size, 5*size)
	if h.BusiestConn() != 5*size {
		t.Fatalf("busiest connection holds %d", h.BusiestConn())
	}

	// a and b share the connection's 10 events; the API's watch is bound
	// only by the hub's total.
	apply(3)
	if a.done == b.done {
		t.Fatalf("over the connection cap: a done %v, b done %v; want one of them", a.done, b.done)
	}
	over := a
	if b.done {
		over = b
	}
	if !strings.Contains(h.Reason(over), "--"+CapBytesPerConn) {
		t.Fatalf("resync reason %q does not name the cap", h.Reason(over))
	}
	if conn.bytes > h.maxConnBytes {
		t.Fatalf("the connection holds %d bytes, cap %d", conn.bytes, h.maxConnBytes)
	}
	if api.done || h.Reason(api) != "" {
		t.Fatal("a watch of no connection was resynced for a connection's cap")
	}
	_, _, connResyncs := h.BacklogStats()
	if connResyncs == 0 {
		t.Fatal("no resync counted for the connection cap")
	}
	h.maxBacklog = 0
	apply(1)
	if !api.done || !strings.Contains(h.Reason(api), "--"+CapBacklogBytes) {
		t.Fatalf("over the hub's cap: api done %v, reason %q", api.done, h.Reason(api))
	}
	for _, w := range []*Watcher{a, b, api} {
		h.Unregister(w)
	}
	check("all unregistered", 0, 0)
	if len(h.budgets) != 0 {
		t.Fatalf("%d connection budgets left", len(h.budgets))
	}
}

// TestWatchHubLockEvents: lock events (Path: the request node) go to the
// watches of the locked path that asked for them (WatchLocks), and to
// recursive ones above with WatchLocks; never to node watches.
func TestWatchHubLockEvents(t *testing.T) {
	h := NewHub(Config{History: 100, Buffer: 100}, &testLog{})
	onA := NewWatcher("/a", session.WatchLocks, 0, false, nil)
	dataA := NewWatcher("/a", session.WatchData|session.WatchChildren, 0, false, nil)
	treeLocks := NewWatcher("/", session.WatchRecursive|session.WatchLocks, 0, false, nil)
	tree := NewWatcher("/", session.WatchRecursive, 0, false, nil)
	onNode := NewWatcher("/a/lock-x-0000000001", session.WatchLocks|session.WatchData, 0, false, nil)
	for _, w := range []*Watcher{onA, dataA, treeLocks, tree, onNode} {
		h.Register(w)
	}
	h.Applied([]*namespace.Result{
		{Index: 1, Events: []namespace.Event{
			{Type: namespace.EventCreated, Path: "/a/lock-x-0000000001", Rev: 1, Session: 7},
			{Type: namespace.EventLockGranted, Path: "/a/lock-x-0000000001", Rev: 1, Session: 7, Lock: &namespace.LockNote{Token: 1}}}},
		{Index: 2, Events: []namespace.Event{
			{Type: namespace.EventCreated, Path: "/a/b/lock-x-0000000002", Rev: 2, Session: 8},
			{Type: namespace.EventLockContended, Path: "/a/lock-x-0000000001", Rev: 2, Session: 7,
				Lock: &namespace.LockNote{Token: 1, Waiter: "/a/b/lock-x-0000000002", WaiterSession: 8}}}},
		{Index: 3, Events: []namespace.Event{
			{Type: namespace.EventDeleted, Path: "/a/lock-x-0000000001", Rev: 3, Session: 7},
			{Type: namespace.EventLockReleased, Path: "/a/lock-x-0000000001", Rev: 3, Session: 7,
				Lock: &namespace.LockNote{Token: 1, Cause: "released"}}}},
	})
	types := func(w *Watcher) string {
		evs, _ := h.Take(w, nil)
		out := ""
		for _, ev := range evs {
			out += fmt.Sprintf("%s@%d ", ev.Type, ev.Rev)
		}
		return out
	}
	for _, c := range []struct {
		name string
		w    *Watcher
		want string
	}{
		{"locks on /a", onA, "lock-granted@1 lock-contended@2 lock-released@3 "},
		{"data and children of /a", dataA, ""},
		{"recursive with locks", treeLocks, "created@1 lock-granted@1 created@2 lock-contended@2 deleted@3 lock-released@3 "},
		{"recursive", tree, "created@1 created@2 deleted@3 "},
		{"the request node", onNode, "created@1 deleted@3 "},
	} {
		if got := types(c.w); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
	// Replay from history follows the same rule.
	late := NewWatcher("/a", session.WatchLocks, 1, false, nil)
	h.Register(late)
	evs, _ := h.Take(late, nil)
	if len(evs) != 2 || evs[0].Type != namespace.EventLockContended || evs[0].Waiter != "/a/b/lock-x-0000000002" ||
		evs[1].Cause != "released" || evs[1].Token != 1 {
		t.Fatalf("replayed lock events: %+v", evs)
	}
}
