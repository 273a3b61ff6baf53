package server

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// hubWatch is a watcher under test and what it received.
type hubWatch struct {
	w    *watcher
	from uint64 // the revision it started after
	at   uint64 // the hub's revision when it registered
	got  []session.WatchEvent
}

// drain takes what the hub queued for hw.
func (hw *hubWatch) drain(h *watchHub) {
	evs, _ := h.take(hw.w, nil)
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
	h := newWatchHub(history, 1<<20, func() uint64 { return 0 }, func() uint64 { return 0 })

	var log []namespace.Event // every event applied
	var watches []*hubWatch
	rev := uint64(0)
	for step := 0; step < 300; step++ {
		if rng.IntN(4) == 0 {
			from := uint64(0)
			if rev > 0 && rng.IntN(2) == 0 {
				from = 1 + rng.Uint64N(rev)
			}
			w := newWatcher(paths[rng.IntN(len(paths))], kinds[rng.IntN(len(kinds))], from, false)
			start := h.register(w)
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
	restores := uint64(0)
	applied := uint64(10)
	h := newWatchHub(100, 3, func() uint64 { return applied }, func() uint64 { return restores })
	ev := func(rev uint64, p string) *namespace.Result {
		return &namespace.Result{Index: rev, Events: []namespace.Event{{Type: namespace.EventDataChanged, Path: p, Rev: rev}}}
	}
	slow := newWatcher("/a", session.WatchData, 0, false)
	live := newWatcher("/a", session.WatchData, 0, false)
	h.register(slow)
	h.register(live)
	h.Applied([]*namespace.Result{ev(11, "/a"), ev(12, "/a")})
	var buf []session.WatchEvent
	buf, _ = h.take(live, buf)
	if len(buf) != 2 {
		t.Fatalf("live watcher got %v", buf)
	}
	h.Applied([]*namespace.Result{ev(13, "/a"), ev(14, "/a")})
	// slow has 11..13 queued; 14 overflows it: Resync before its oldest.
	got, done := h.take(slow, nil)
	if !done || len(got) != 1 || got[0].Type != session.EventResync || got[0].Rev != 10 {
		t.Fatalf("overflowed watcher: %v done=%v", got, done)
	}
	if h.watchers() != 1 {
		t.Fatalf("%d watchers registered, want the live one", h.watchers())
	}
	if got, _ := h.take(live, nil); len(got) != 2 || got[1].Rev != 14 {
		t.Fatalf("live watcher got %v", got)
	}
	// A snapshot install: history is gone, live watchers resync at the
	// revision before the next applied command.
	restores, applied = 1, 50
	h.Applied([]*namespace.Result{ev(51, "/a")})
	got, done = h.take(live, nil)
	if done || len(got) != 2 || got[0].Type != session.EventResync || got[0].Rev != 50 || got[1].Rev != 51 {
		t.Fatalf("after a restore: %v done=%v", got, done)
	}
	late := newWatcher("/a", session.WatchData, 12, false)
	if h.register(late) != 12 {
		t.Fatal("start revision")
	}
	if got, _ := h.take(late, nil); len(got) != 1 || got[0].Type != session.EventResync || got[0].Rev != 51 {
		t.Fatalf("watch from before the restore: %v", got)
	}
}

// The hub counts bytes (path + watchEventOverhead per event) for its
// total and per connection: a writer that takes again gives back what it
// took before (the HTTP API's writer never calls sent), a connection over
// its cap gets its watches resynced naming the cap while a watch of no
// connection goes on, and everything is given back at the end.
func TestWatchHubBytes(t *testing.T) {
	h := newWatchHub(100, 1000, func() uint64 { return 0 }, func() uint64 { return 0 })
	path := "/" + strings.Repeat("p", 99)
	size := len(path) + watchEventOverhead
	h.maxConnBytes = 10 * size
	conn := &watchBudget{}
	a, b := newWatcher(path, session.WatchData, 0, false), newWatcher(path, session.WatchData, 0, false)
	a.budget, b.budget = conn, conn
	api := newWatcher(path, session.WatchData, 0, false)
	for _, w := range []*watcher{a, b, api} {
		h.register(w)
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
		if got, _, _ := h.backlogStats(); got != total || conn.bytes != perConn {
			t.Fatalf("%s: hub holds %d bytes, connection %d; want %d and %d", what, got, conn.bytes, total, perConn)
		}
	}
	apply(3)
	check("3 events for 3 watches", 9*size, 6*size)
	got, _ := h.take(a, nil)
	h.sent(a, got[:1])
	check("a sent 1 of the 3 it took", 8*size, 5*size)
	h.take(a, got)
	check("a took again", 6*size, 3*size)
	evs, _ := h.take(api, nil)
	apply(1)
	h.take(api, evs) // no sent: the API's writer
	check("api took twice without sent", 6*size, 5*size)
	if h.busiestConn() != 5*size {
		t.Fatalf("busiest connection holds %d", h.busiestConn())
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
	if !strings.Contains(h.reason(over), "--"+capWatchBytesPerConn) {
		t.Fatalf("resync reason %q does not name the cap", h.reason(over))
	}
	if conn.bytes > h.maxConnBytes {
		t.Fatalf("the connection holds %d bytes, cap %d", conn.bytes, h.maxConnBytes)
	}
	if api.done || h.reason(api) != "" {
		t.Fatal("a watch of no connection was resynced for a connection's cap")
	}
	_, _, connResyncs := h.backlogStats()
	if connResyncs == 0 {
		t.Fatal("no resync counted for the connection cap")
	}
	h.maxBacklog = 0
	apply(1)
	if !api.done || !strings.Contains(h.reason(api), "--"+capWatchBacklogBytes) {
		t.Fatalf("over the hub's cap: api done %v, reason %q", api.done, h.reason(api))
	}
	for _, w := range []*watcher{a, b, api} {
		h.unregister(w)
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
	h := newWatchHub(100, 100, func() uint64 { return 0 }, func() uint64 { return 0 })
	onA := newWatcher("/a", session.WatchLocks, 0, false)
	dataA := newWatcher("/a", session.WatchData|session.WatchChildren, 0, false)
	treeLocks := newWatcher("/", session.WatchRecursive|session.WatchLocks, 0, false)
	tree := newWatcher("/", session.WatchRecursive, 0, false)
	onNode := newWatcher("/a/lock-x-0000000001", session.WatchLocks|session.WatchData, 0, false)
	for _, w := range []*watcher{onA, dataA, treeLocks, tree, onNode} {
		h.register(w)
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
	types := func(w *watcher) string {
		evs, _ := h.take(w, nil)
		out := ""
		for _, ev := range evs {
			out += fmt.Sprintf("%s@%d ", ev.Type, ev.Rev)
		}
		return out
	}
	for _, c := range []struct {
		name string
		w    *watcher
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
	late := newWatcher("/a", session.WatchLocks, 1, false)
	h.register(late)
	evs, _ := h.take(late, nil)
	if len(evs) != 2 || evs[0].Type != namespace.EventLockContended || evs[0].Waiter != "/a/b/lock-x-0000000002" ||
		evs[1].Cause != "released" || evs[1].Token != 1 {
		t.Fatalf("replayed lock events: %+v", evs)
	}
}
