package server_test

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server"
	"github.com/latch-io/latch/session"
)

// watchStream is an open MsgWatch stream and its acknowledgement.
type watchStream struct {
	t   *testing.T
	sr  *session.StreamReader
	ack *session.Response
}

func watch(t *testing.T, conn *session.Conn, req *session.Request) *watchStream {
	t.Helper()
	req.Type = session.MsgWatch
	sr, err := session.OpenStreaming(ctxT(t), conn, req)
	if err != nil {
		t.Fatalf("watch %s: %v", req.Path, err)
	}
	t.Cleanup(func() { sr.Close() })
	ack, err := sr.Next()
	if err != nil {
		t.Fatalf("watch %s: ack: %v", req.Path, err)
	}
	if len(ack.Events) != 0 {
		t.Fatalf("watch %s: ack carries events %+v", req.Path, ack.Events)
	}
	return &watchStream{t: t, sr: sr, ack: ack}
}

// next returns the stream's next n events (they may span frames).
func (w *watchStream) next(n int) []session.WatchEvent {
	w.t.Helper()
	var out []session.WatchEvent
	for len(out) < n {
		resp, err := w.sr.Next()
		if err != nil {
			w.t.Fatalf("after %d of %d events: %v", len(out), n, err)
		}
		out = append(out, resp.Events...)
	}
	if len(out) > n {
		w.t.Fatalf("got %d events, want %d: %+v", len(out), n, out)
	}
	return out
}

// end expects the stream to end (io.EOF) with no further events.
func (w *watchStream) end() {
	w.t.Helper()
	for {
		resp, err := w.sr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			w.t.Fatalf("stream ended with %v, want EOF", err)
		}
		if len(resp.Events) > 0 {
			w.t.Fatalf("events %+v before the end", resp.Events)
		}
	}
}

type ev struct {
	typ  namespace.EventType
	path string
}

func expectEvents(t *testing.T, got []session.WatchEvent, want ...ev) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("events %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Type != want[i].typ || got[i].Path != want[i].path {
			t.Fatalf("event %d = %v %s, want %v %s (all: %+v)", i, got[i].Type, got[i].Path, want[i].typ, want[i].path, got)
		}
		if i > 0 && got[i].Rev < got[i-1].Rev {
			t.Fatalf("revision went back: %+v", got)
		}
	}
}

func TestWatchKinds(t *testing.T) {
	fc := startFront(t, 3, func(_ int, cfg *server.Config) { cfg.MaxWatchesPerConn = 5 })
	leader := fc.WaitLeader()
	conn := fc.dial(leader)
	wconn := fc.dial(follower(fc, leader)) // any member serves watches
	ok(t, conn, &session.Request{Type: session.MsgCreate, Path: "/x"})
	sync := ok(t, conn, &session.Request{Type: session.MsgSync})
	fc.WaitApplied(sync.Rev)

	data := watch(t, wconn, &session.Request{Path: "/x", Kind: session.WatchData})
	kids := watch(t, wconn, &session.Request{Path: "/x", Kind: session.WatchChildren})
	exists := watch(t, wconn, &session.Request{Path: "/x/y", Kind: session.WatchExists})
	rec := watch(t, wconn, &session.Request{Path: "/x", Kind: session.WatchRecursive})
	once := watch(t, wconn, &session.Request{Path: "/x", Kind: session.WatchChildren, OneShot: true})
	if data.ack.Rev < sync.Rev {
		t.Fatalf("watch starts after %d, before the synced revision %d", data.ack.Rev, sync.Rev)
	}
	// The connection's sixth watch is one too many; the refusal is a clear
	// error and costs the others nothing.
	sr, err := session.OpenStreaming(ctxT(t), wconn, &session.Request{Type: session.MsgWatch, Path: "/"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sr.Next(); !errors.Is(err, session.ErrTooManyWatches) {
		t.Fatalf("sixth watch: %v", err)
	}

	ok(t, conn, &session.Request{Type: session.MsgCreate, Path: "/x/y"})
	ok(t, conn, &session.Request{Type: session.MsgSet, Path: "/x/y", Data: []byte("1"), Version: namespace.AnyVersion})
	ok(t, conn, &session.Request{Type: session.MsgSet, Path: "/x", Data: []byte("2"), Version: namespace.AnyVersion})
	ok(t, conn, &session.Request{Type: session.MsgDelete, Path: "/x/y", Version: namespace.AnyVersion})
	ok(t, conn, &session.Request{Type: session.MsgCreate, Path: "/other"}) // outside every watch
	ok(t, conn, &session.Request{Type: session.MsgDelete, Path: "/x", Version: namespace.AnyVersion})

	expectEvents(t, data.next(2), ev{namespace.EventDataChanged, "/x"}, ev{namespace.EventDeleted, "/x"})
	expectEvents(t, kids.next(2), ev{namespace.EventChildrenChanged, "/x"}, ev{namespace.EventChildrenChanged, "/x"})
	expectEvents(t, exists.next(2), ev{namespace.EventCreated, "/x/y"}, ev{namespace.EventDeleted, "/x/y"})
	expectEvents(t, rec.next(7),
		ev{namespace.EventCreated, "/x/y"}, ev{namespace.EventChildrenChanged, "/x"},
		ev{namespace.EventDataChanged, "/x/y"},
		ev{namespace.EventDataChanged, "/x"},
		ev{namespace.EventDeleted, "/x/y"}, ev{namespace.EventChildrenChanged, "/x"},
		ev{namespace.EventDeleted, "/x"})
	expectEvents(t, once.next(1), ev{namespace.EventChildrenChanged, "/x"})
	once.end()

	// Bad watches are refused with a clear error.
	for _, req := range []*session.Request{
		{Type: session.MsgWatch, Path: "no-slash"},
		{Type: session.MsgWatch, Path: "/x", Kind: 0x80},
	} {
		sr, err := session.OpenStreaming(ctxT(t), wconn, req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sr.Next(); !errors.Is(err, namespace.ErrBadPath) && !errors.Is(err, session.ErrMalformed) {
			t.Fatalf("watch %+v: %v", req, err)
		}
	}
}

func TestWatchReplayFromRevision(t *testing.T) {
	fc := startFront(t, 3, nil)
	leader := fc.WaitLeader()
	conn := fc.dial(leader)
	ok(t, conn, &session.Request{Type: session.MsgCreate, Path: "/r"})
	var revs []uint64
	for i := range 6 {
		r := ok(t, conn, &session.Request{Type: session.MsgCreate, Path: fmt.Sprintf("/r/k%d", i)})
		revs = append(revs, r.Rev)
	}
	// From the third create on: four replayed creates, then live events,
	// in order, each once.
	w := watch(t, conn, &session.Request{Path: "/r", Kind: session.WatchChildren | session.WatchRecursive, FromRev: revs[1]})
	if w.ack.Rev != revs[1] {
		t.Fatalf("ack rev %d, want the FromRev %d", w.ack.Rev, revs[1])
	}
	live := ok(t, conn, &session.Request{Type: session.MsgCreate, Path: "/r/live"})
	got := w.next(10)
	for i := 0; i < 5; i++ {
		path := fmt.Sprintf("/r/k%d", i+2)
		want := revs[min(i+2, 5)]
		if i == 4 {
			path, want = "/r/live", live.Rev
		}
		if got[2*i].Type != namespace.EventCreated || got[2*i].Path != path || got[2*i].Rev != want ||
			got[2*i+1].Type != namespace.EventChildrenChanged || got[2*i+1].Rev != want {
			t.Fatalf("events %d,%d = %+v %+v, want create %s at %d", 2*i, 2*i+1, got[2*i], got[2*i+1], path, want)
		}
	}

	// A one-shot watch from the past fires with the first retained match.
	once := watch(t, conn, &session.Request{Path: "/r/k4", Kind: session.WatchExists, FromRev: revs[0], OneShot: true})
	expectEvents(t, once.next(1), ev{namespace.EventCreated, "/r/k4"})
	once.end()
}

func TestWatchResyncWhenHistoryIsGone(t *testing.T) {
	fc := startFront(t, 3, func(_ int, cfg *server.Config) { cfg.WatchHistory = 8 })
	leader := fc.WaitLeader()
	conn := fc.dial(leader)
	first := ok(t, conn, &session.Request{Type: session.MsgCreate, Path: "/h"})
	var last uint64
	for i := range 10 { // 20 events: the first ones fall out of the history
		last = ok(t, conn, &session.Request{Type: session.MsgCreate, Path: fmt.Sprintf("/h/k%d", i)}).Rev
	}
	w := watch(t, conn, &session.Request{Path: "/h", Kind: session.WatchChildren, FromRev: first.Rev})
	got := w.next(1)
	if got[0].Type != session.EventResync || got[0].Rev < last {
		t.Fatalf("watch from a forgotten revision: %+v, want a resync at %d or later", got[0], last)
	}
	// The watch goes on after the resync.
	live := ok(t, conn, &session.Request{Type: session.MsgCreate, Path: "/h/after"})
	got = w.next(1)
	if got[0].Type != namespace.EventChildrenChanged || got[0].Rev != live.Rev {
		t.Fatalf("event after the resync: %+v, want children changed at %d", got[0], live.Rev)
	}
	// Recent history is still replayed.
	w2 := watch(t, conn, &session.Request{Path: "/h", Kind: session.WatchChildren, FromRev: last - 1})
	if got := w2.next(2); got[0].Rev != last || got[1].Rev != live.Rev || got[0].Type == session.EventResync {
		t.Fatalf("replay of recent history: %+v", got)
	}
}

// A watcher whose queue overflows gets a Resync naming where to resume,
// and its stream ends; memory stays bounded by WatchBuffer.
func TestWatchOverflowResyncs(t *testing.T) {
	const buffer = 4
	fc := startFront(t, 3, func(_ int, cfg *server.Config) { cfg.WatchBuffer = buffer })
	leader := fc.WaitLeader()
	conn := fc.dial(leader)
	ok(t, conn, &session.Request{Type: session.MsgCreate, Path: "/o"})
	w := watch(t, conn, &session.Request{Path: "/o", Kind: session.WatchRecursive})

	// One command, 40 events, routed in one go: far more than the queue.
	ops := make([]session.Op, 20)
	for i := range ops {
		ops[i] = session.Op{Type: namespace.OpCreate, Path: fmt.Sprintf("/o/k%02d", i)}
	}
	m := ok(t, conn, &session.Request{Type: session.MsgMulti, Ops: ops})
	var got []session.WatchEvent
	for {
		resp, err := w.sr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resp.Events...)
	}
	if len(got) == 0 || len(got) > buffer+1 {
		t.Fatalf("overflowing watch delivered %d events: %+v", len(got), got)
	}
	resync := got[len(got)-1]
	if resync.Type != session.EventResync || resync.Rev >= m.Rev || resync.Rev < w.ack.Rev {
		t.Fatalf("last event %+v, want a resync before rev %d", resync, m.Rev)
	}
	// Resuming from the resync's revision replays the command; it does not
	// fit the queue either, so the new watch resyncs at once to the current
	// revision and then follows live events.
	w2 := watch(t, conn, &session.Request{Path: "/o", Kind: session.WatchRecursive, FromRev: resync.Rev})
	if got := w2.next(1); got[0].Type != session.EventResync || got[0].Rev < m.Rev {
		t.Fatalf("re-watch: %+v", got)
	}
	live := ok(t, conn, &session.Request{Type: session.MsgSet, Path: "/o/k00", Version: namespace.AnyVersion})
	if got := w2.next(1); got[0].Type != namespace.EventDataChanged || got[0].Rev != live.Rev {
		t.Fatalf("live event after the resync: %+v", got)
	}
}
