package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"
)

func TestWatch(t *testing.T) {
	tc := startCluster(t, 3, clusterOptions{})
	c := tc.dial(5 * time.Second)
	ctx := testCtx(t)

	// Default: the node's creation, data changes and deletion.
	w, err := c.Watch(ctx, "/x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, "/x", nil); err != nil {
		t.Fatal(err)
	}
	created := nextEvent(t, w)
	st, err := c.Set(ctx, "/x", []byte("1"))
	if err != nil {
		t.Fatal(err)
	}
	changed := nextEvent(t, w)
	if err := c.Delete(ctx, "/x"); err != nil {
		t.Fatal(err)
	}
	deleted := nextEvent(t, w)
	if created.Type != EventCreated || changed.Type != EventDataChanged || deleted.Type != EventDeleted ||
		changed.Revision != st.ModRev || !(created.Revision < changed.Revision && changed.Revision < deleted.Revision) ||
		created.Path != "/x" || created.Revision <= w.StartRevision() {
		t.Fatalf("events %+v %+v %+v (set at %d, start %d)", created, changed, deleted, st.ModRev, w.StartRevision())
	}
	w.Close()
	if _, ok := <-w.Events(); ok || w.Err() != nil {
		t.Fatalf("after Close: channel open=%v err=%v", ok, w.Err())
	}

	// Children: creations and deletions under the node, not data changes.
	if _, err := c.Create(ctx, "/p", nil); err != nil {
		t.Fatal(err)
	}
	cw, err := c.Watch(ctx, "/p", Children())
	if err != nil {
		t.Fatal(err)
	}
	defer cw.Close()
	if _, err := c.Create(ctx, "/p/a", nil); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, cw); ev.Type != EventChildrenChanged || ev.Path != "/p" {
		t.Fatalf("children event %+v", ev)
	}
	if _, err := c.Set(ctx, "/p/a", []byte("data")); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "/p/a"); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, cw); ev.Type != EventChildrenChanged {
		t.Fatalf("the child's data change or deletion reported as %+v", ev)
	}
	noEvent(t, cw)

	// Recursive: everything below, with the ephemeral owner.
	rw, err := c.Watch(ctx, "/p", Recursive())
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if _, err := c.Create(ctx, "/p/e", nil, Ephemeral()); err != nil {
		t.Fatal(err)
	}
	got := []Event{nextEvent(t, rw), nextEvent(t, rw)}
	sort.Slice(got, func(i, j int) bool { return got[i].Path < got[j].Path })
	if got[0].Path != "/p" || got[1].Path != "/p/e" || got[1].Type != EventCreated || got[1].Session != c.Session().ID() ||
		got[0].Revision != got[1].Revision {
		t.Fatalf("recursive events %+v", got)
	}

	// OneShot: one event, then the watch ends cleanly.
	ow, err := c.Watch(ctx, "/p/e", Data(), OneShot())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set(ctx, "/p/e", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set(ctx, "/p/e", []byte("2")); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, ow); ev.Type != EventDataChanged {
		t.Fatalf("one-shot event %+v", ev)
	}
	select {
	case ev, ok := <-ow.Events():
		if ok {
			t.Fatalf("one-shot watch delivered a second event %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("one-shot watch did not end")
	}
	if ow.Err() != nil {
		t.Fatalf("one-shot Err = %v", ow.Err())
	}

	// FromRevision replays what was committed after the revision.
	if _, err := c.Create(ctx, "/f", nil); err != nil {
		t.Fatal(err)
	}
	st1, _ := c.Stat(ctx, "/f")
	st2, err := c.Set(ctx, "/f", []byte("later"))
	if err != nil {
		t.Fatal(err)
	}
	fw, err := c.Watch(ctx, "/f", FromRevision(st1.ModRev))
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	if ev := nextEvent(t, fw); ev.Type != EventDataChanged || ev.Revision != st2.ModRev {
		t.Fatalf("replayed event %+v, want data-changed at %d", ev, st2.ModRev)
	}

	// The context bounds the watch.
	wctx, cancel := context.WithCancel(ctx)
	xw, err := c.Watch(wctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	wait(t, "watch ends with its ctx", xw.Done())
	if !errors.Is(xw.Err(), context.Canceled) {
		t.Fatalf("watch after its ctx ended: %v", xw.Err())
	}

	// A bad path is refused when the watch is made.
	if _, err := c.Watch(ctx, "no-slash"); !errors.Is(err, ErrBadPath) {
		t.Fatalf("watch bad path: %v", err)
	}
}

// TestWatchResync asks for history the servers no longer keep: the watch
// must say so with a Resync naming where it continues, then deliver what
// follows.
func TestWatchResync(t *testing.T) {
	tc := startCluster(t, 3, clusterOptions{watchHistory: 8})
	c := tc.dial(5 * time.Second)
	ctx := testCtx(t)
	if _, err := c.Create(ctx, "/h", nil); err != nil {
		t.Fatal(err)
	}
	first, _ := c.Stat(ctx, "/h")
	for i := range 20 {
		if _, err := c.Set(ctx, "/h", []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := c.Watch(ctx, "/h", FromRevision(first.ModRev))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ev := nextEvent(t, w)
	if ev.Type != EventResync || ev.Revision <= first.ModRev {
		t.Fatalf("first event %+v, want a resync after %d", ev, first.ModRev)
	}
	st, err := c.Set(ctx, "/h", []byte("after"))
	if err != nil {
		t.Fatal(err)
	}
	for {
		ev = nextEvent(t, w)
		if ev.Type == EventResync {
			t.Fatalf("a second resync %+v", ev)
		}
		if ev.Revision == st.ModRev {
			break
		}
	}
	if ev.Type != EventDataChanged {
		t.Fatalf("event after the resync %+v", ev)
	}
}

// TestWatchAcrossLeaderChange writes keys while the leader is stopped
// midway, and checks the stream a recursive watch delivered against the
// committed history, read back from the tree: every committed create
// (acknowledged or not) arrives exactly once, in revision order, with the
// parent's children change at the same revision, and nothing else.
func TestWatchAcrossLeaderChange(t *testing.T) {
	tc := startCluster(t, 3, clusterOptions{})
	c := tc.dial(3 * time.Second)
	ctx := testCtx(t)
	if _, err := c.Create(ctx, "/w", nil); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(ctx, "/w", Recursive())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	var stream []Event
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for ev := range w.Events() {
			if ev.Type == EventDataChanged && ev.Path == "/w" {
				return // the end marker, after every create
			}
			stream = append(stream, ev)
		}
	}()

	const n = 200
	acked := map[string]bool{}
	stopped := make(chan struct{})
	for i := range n {
		if i == n/2 {
			go func() {
				defer close(stopped)
				tc.Stop(tc.WaitLeader())
			}()
		}
		p := fmt.Sprintf("/w/k%03d", i)
		switch _, err := c.Create(ctx, p, nil); {
		case err == nil:
			acked[p] = true
		case errors.Is(err, ErrUnknownOutcome):
			// Cut off by the leader's stop: it may or may not have
			// committed; the history below decides.
		default:
			t.Fatalf("create %s: %v", p, err)
		}
	}
	wait(t, "leader stopped", stopped)
	if _, err := c.Create(ctx, "/w/end", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set(ctx, "/w", []byte("end")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-collected:
	case <-time.After(20 * time.Second):
		t.Fatalf("the watch did not deliver the end marker; got %d events", len(stream))
	}
	if w.Err() != nil {
		t.Fatalf("watch ended: %v", w.Err())
	}
	if len(acked) < n/2 {
		t.Fatalf("only %d of %d writes acknowledged", len(acked), n)
	}

	// The committed history, from the tree: each child's create revision.
	names, err := c.Children(ctx, "/w")
	if err != nil {
		t.Fatal(err)
	}
	type ev struct {
		typ  EventType
		path string
		rev  uint64
	}
	var want []ev
	for _, name := range names {
		st, err := c.Stat(ctx, "/w/"+name)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, ev{EventChildrenChanged, "/w", st.CreateRev}, ev{EventCreated, "/w/" + name, st.CreateRev})
	}
	sort.Slice(want, func(i, j int) bool {
		if want[i].rev != want[j].rev {
			return want[i].rev < want[j].rev
		}
		return want[i].path < want[j].path
	})
	for p := range acked {
		if !slices.Contains(names, p[len("/w/"):]) {
			t.Fatalf("acknowledged %s is not in the tree", p)
		}
	}

	// The stream: revisions never go back; within a revision compare as a
	// set (the order of one command's events is the server's business).
	got := make([]ev, len(stream))
	for i, e := range stream {
		if e.Type == EventResync {
			t.Fatalf("resync at %d: events were lost", e.Revision)
		}
		if i > 0 && e.Revision < stream[i-1].Revision {
			t.Fatalf("revision went back: %+v after %+v", e, stream[i-1])
		}
		got[i] = ev{e.Type, e.Path, e.Revision}
	}
	sort.SliceStable(got, func(i, j int) bool {
		if got[i].rev != got[j].rev {
			return got[i].rev < got[j].rev
		}
		return got[i].path < got[j].path
	})
	for i := range max(len(got), len(want)) {
		if i >= len(got) || i >= len(want) || got[i] != want[i] {
			var g, h any = "nothing", "nothing"
			if i < len(got) {
				g = got[i]
			}
			if i < len(want) {
				h = want[i]
			}
			t.Fatalf("stream has %d events, history %d; event %d: got %+v, history says %+v",
				len(got), len(want), i, g, h)
		}
	}
}
