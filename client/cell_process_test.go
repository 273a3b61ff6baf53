package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// TestCellRefusesOtherPaths runs three real latchd processes started with
// --cell a: every path under /a is served (the leader created /a), and
// every request naming another path (a plain write, a read of /, one op
// of a multi, a lock, a watch on /, a sequencer) is refused with
// ErrWrongCell naming the right cell, and nothing of it is applied.
func TestCellRefusesOtherPaths(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := proc.StartCluster(t, 3, "--cell", "a")
	c.WaitLeader(t)
	cl := dialProcCluster(t, c, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), proc.WaitTimeout)
	defer cancel()

	wrong := func(what string, err error, cell string) {
		t.Helper()
		if !errors.Is(err, session.ErrWrongCell) {
			t.Fatalf("%s: %v, want ErrWrongCell", what, err)
		}
		if want := "cell " + cell; cell != "" && !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: %q does not name %q", what, err, want)
		}
	}

	// The cell's own paths, the root /a included, work as before.
	if _, err := cl.Create(ctx, "/a/x", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Set(ctx, "/a", []byte("root of a")); err != nil {
		t.Fatal(err)
	}
	m := NewMutex(cl.Session(), "/a/lock")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := cl.CheckSequencer(ctx, m.Sequencer()); err != nil || !ok {
		t.Fatalf("CheckSequencer in the cell: %v %v", ok, err)
	}

	// Other paths: refused, naming the cell they belong to.
	_, err := cl.Create(ctx, "/b/x", nil)
	wrong("create /b/x", err, `"b"`)
	_, _, err = cl.Get(ctx, "/")
	wrong("get /", err, `"a"`)
	_, err = cl.Children(ctx, "/")
	wrong("children /", err, "")
	_, err = cl.Create(ctx, "/ab", nil) // a prefix of the name is not the cell
	wrong("create /ab", err, `"ab"`)
	_, err = cl.Multi(ctx, OpCreate("/a/m", nil), OpCreate("/b/m", nil))
	wrong("multi across cells", err, `"b"`)
	if ok, _, err := cl.Exists(ctx, "/a/m"); err != nil || ok {
		t.Fatalf("a refused multi applied its /a op: exists=%v err=%v", ok, err)
	}
	err = NewMutex(cl.Session(), "/b/lock").Lock(ctx)
	wrong("lock /b/lock", err, `"b"`)
	w, err := cl.Watch(ctx, "/", Recursive())
	if err == nil {
		w.Close()
	}
	wrong("watch / recursive", err, "")
	sq := m.Sequencer()
	sq.Path = "/b/lock"
	_, err = cl.CheckSequencer(ctx, sq)
	wrong("sequencer of /b", err, `"b"`)

	// The session and the cell's lock survived every refusal.
	if ok, err := cl.CheckSequencer(ctx, m.Sequencer()); err != nil || !ok {
		t.Fatalf("after the refusals: %v %v", ok, err)
	}
	names, err := cl.Children(ctx, "/a")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n == "m" {
			t.Fatalf("children of /a: %v", names)
		}
	}
	if _, _, err := cl.Get(ctx, "/b/x"); !errors.Is(err, session.ErrWrongCell) || errors.Is(err, namespace.ErrNoNode) {
		t.Fatalf("get /b/x: %v", err)
	}
}
