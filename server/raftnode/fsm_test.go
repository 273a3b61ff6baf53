package raftnode

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/namespace/store"
)

type recordingObserver struct{ batches [][]*namespace.Result }

func (o *recordingObserver) Applied(rs []*namespace.Result) { o.batches = append(o.batches, rs) }

func openStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(store.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func commandLog(t testing.TB, index uint64, cmd namespace.Command) *raft.Log {
	t.Helper()
	b, err := namespace.EncodeEntry(&namespace.Entry{Time: int64(index) * 1e9, Cmd: cmd})
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: b}
}

func TestFSMApplyBatch(t *testing.T) {
	obs := &recordingObserver{}
	f := NewFSM(FSMConfig{Store: openStore(t), Observer: obs})
	logs := []*raft.Log{
		commandLog(t, 1, namespace.Command{Op: namespace.OpCreate, Path: "/a", Data: []byte("x")}),
		{Index: 2, Term: 1, Type: raft.LogConfiguration, Data: []byte("config, not for the namespace")},
		{Index: 3, Term: 1, Type: raft.LogCommand, Data: []byte{0xc1, 0xff, 0x00}},
		commandLog(t, 4, namespace.Command{Op: namespace.OpCreate, Path: "/a"}),
	}
	out := f.ApplyBatch(logs)
	if len(out) != len(logs) {
		t.Fatalf("%d responses for %d logs", len(out), len(logs))
	}
	if r, ok := out[0].(*namespace.Result); !ok || r.Err != nil || r.Index != 1 || r.Path != "/a" {
		t.Fatalf("create response = %#v", out[0])
	}
	if out[1] != nil {
		t.Fatalf("configuration log response = %#v, want nil", out[1])
	}
	if r, ok := out[2].(*namespace.Result); !ok || !errors.Is(r.Err, namespace.ErrMalformed) {
		t.Fatalf("garbage log response = %#v, want ErrMalformed", out[2])
	}
	if r, ok := out[3].(*namespace.Result); !ok || !errors.Is(r.Err, namespace.ErrNodeExists) {
		t.Fatalf("duplicate create response = %#v", out[3])
	}
	if got, _ := f.Applied(); got != 4 {
		t.Fatalf("applied index %d, want 4", got)
	}
	if got := f.store.AppliedIndex(); got != 4 {
		t.Fatalf("namespace applied index %d, want 4 (the garbage entry must still advance it)", got)
	}
	if len(obs.batches) != 1 || len(obs.batches[0]) != 3 {
		t.Fatalf("observer saw %d batches %+v, want one of 3 results", len(obs.batches), obs.batches)
	}

	// Re-delivered entries (raft replays after a restart) are skipped and
	// not shown to the observer.
	again := f.ApplyBatch(logs[:1])
	if r := again[0].(*namespace.Result); !errors.Is(r.Err, namespace.ErrAlreadyApplied) {
		t.Fatalf("replayed entry: %v", r.Err)
	}
	if len(obs.batches) != 1 {
		t.Fatalf("observer told about a replayed entry")
	}
	if data, _, err := f.store.Get("/a"); err != nil || string(data) != "x" {
		t.Fatalf("/a = %q, %v", data, err)
	}
}

func TestFSMWaitApplied(t *testing.T) {
	f := NewFSM(FSMConfig{Store: openStore(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f.WaitApplied(ctx, nil, 2) }()
	f.ApplyBatch([]*raft.Log{commandLog(t, 1, namespace.Command{Op: namespace.OpNoop})})
	select {
	case err := <-done:
		t.Fatalf("waitApplied(2) returned at index 1: %v", err)
	default:
	}
	f.ApplyBatch([]*raft.Log{commandLog(t, 2, namespace.Command{Op: namespace.OpNoop})})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	short, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := f.WaitApplied(short, nil, 10); !errors.Is(err, context.Canceled) {
		t.Fatalf("waitApplied on cancelled ctx = %v", err)
	}
	stop := make(chan struct{})
	close(stop)
	if err := f.WaitApplied(context.Background(), stop, 10); !errors.Is(err, ErrClosed) {
		t.Fatalf("waitApplied after stop = %v", err)
	}
}

// memSink is a raft.SnapshotSink over a buffer.
type memSink struct {
	bytes.Buffer
	cancelled, closed bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { s.closed = true; return nil }

func TestFSMSnapshotRestore(t *testing.T) {
	src := NewFSM(FSMConfig{Store: openStore(t)})
	src.ApplyBatch([]*raft.Log{
		commandLog(t, 1, namespace.Command{Op: namespace.OpCreate, Path: "/a", Data: []byte("1")}),
		commandLog(t, 2, namespace.Command{Op: namespace.OpCreate, Path: "/a/b", Data: []byte("2")}),
	})
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Writes after the snapshot are not in it: one read timestamp.
	src.ApplyBatch([]*raft.Log{commandLog(t, 3, namespace.Command{Op: namespace.OpCreate, Path: "/late"})})
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil || !sink.closed || sink.cancelled {
		t.Fatalf("Persist: %v closed=%v cancelled=%v", err, sink.closed, sink.cancelled)
	}
	snap.Release()

	dst := NewFSM(FSMConfig{Store: openStore(t)})
	dst.ApplyBatch([]*raft.Log{commandLog(t, 1, namespace.Command{Op: namespace.OpCreate, Path: "/other"})})
	if err := dst.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if dst.restores.Load() != 1 {
		t.Fatalf("restores = %d", dst.restores.Load())
	}
	if got, _ := dst.Applied(); got != 2 {
		t.Fatalf("applied after restore = %d, want 2", got)
	}
	if _, _, err := dst.store.Get("/a/b"); err != nil {
		t.Fatalf("restored state lacks /a/b: %v", err)
	}
	for _, p := range []string{"/other", "/late"} {
		if ok, _, _ := dst.store.Exists(p); ok {
			t.Fatalf("restored state has %s", p)
		}
	}
}

// TestFSMRestoreRefusesBadSnapshot: a snapshot raft installs that fails
// store.CheckSnapshot (here a flipped byte) is refused before the
// store drops its state: the member keeps what it had, applied index
// included, and goes on applying; the spooled copy is removed.
func TestFSMRestoreRefusesBadSnapshot(t *testing.T) {
	src := NewFSM(FSMConfig{Store: openStore(t)})
	src.ApplyBatch([]*raft.Log{commandLog(t, 1, namespace.Command{Op: namespace.OpCreate, Path: "/a", Data: []byte("payload")})})
	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	bad := bytes.Clone(sink.Bytes())
	bad[bytes.Index(bad, []byte("payload"))] ^= 0x01

	dst := NewFSM(FSMConfig{Store: openStore(t)})
	dst.spoolDir = t.TempDir()
	dst.ApplyBatch([]*raft.Log{commandLog(t, 1, namespace.Command{Op: namespace.OpCreate, Path: "/mine"})})
	err = dst.Restore(io.NopCloser(bytes.NewReader(bad)))
	if !errors.Is(err, namespace.ErrBadSnapshot) {
		t.Fatalf("Restore of a damaged snapshot: %v, want ErrBadSnapshot", err)
	}
	if ok, _, _ := dst.store.Exists("/mine"); !ok || dst.restores.Load() != 0 {
		t.Fatalf("a refused restore changed the state: /mine %v, restores %d", ok, dst.restores.Load())
	}
	if got, _ := dst.Applied(); got != 1 {
		t.Fatalf("applied after a refused restore = %d, want 1", got)
	}
	if rs := dst.ApplyBatch([]*raft.Log{commandLog(t, 2, namespace.Command{Op: namespace.OpCreate, Path: "/next"})}); rs[0].(*namespace.Result).Err != nil {
		t.Fatalf("apply after a refused restore: %v", rs[0])
	}
	if left, _ := filepath.Glob(filepath.Join(dst.spoolDir, "*")); len(left) != 0 {
		t.Fatalf("spooled files left: %v", left)
	}
}

// An entry that does not decode is applied as a no-op, which may grant
// locks left over from a full batch: observers see those grants and
// events, and the proposer gets the decode error with them.
func TestFSMDecodeErrorKeepsGrants(t *testing.T) {
	limits := namespace.DefaultLimits()
	limits.MaxLockBatch = 1
	st, err := store.Open(store.Config{Dir: t.TempDir(), Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	obs := &recordingObserver{}
	f := NewFSM(FSMConfig{Store: st, Observer: obs})
	// Session 1 holds /l; sessions 3 and 4 wait to read it.
	f.ApplyBatch([]*raft.Log{
		commandLog(t, 1, namespace.Command{Op: namespace.OpSessionOpen, TTLMillis: 10000}),
		commandLog(t, 2, namespace.Command{Op: namespace.OpLockRequest, Path: "/l", Session: 1}),
		commandLog(t, 3, namespace.Command{Op: namespace.OpSessionOpen, TTLMillis: 10000}),
		commandLog(t, 4, namespace.Command{Op: namespace.OpSessionOpen, TTLMillis: 10000}),
		commandLog(t, 5, namespace.Command{Op: namespace.OpLockRequest, Path: "/l", Mode: namespace.LockShared, Session: 3}),
		commandLog(t, 6, namespace.Command{Op: namespace.OpLockRequest, Path: "/l", Mode: namespace.LockShared, Session: 4}),
	})
	q, err := st.LockQueue("/l")
	if err != nil || len(q) != 3 || !q[0].Granted {
		t.Fatalf("queue %+v %v", q, err)
	}
	// Releasing the writer makes both readers runnable; one batch grants one.
	out := f.ApplyBatch([]*raft.Log{commandLog(t, 7, namespace.Command{Op: namespace.OpLockRelease, Path: q[0].Node, Session: 1})})
	if r := out[0].(*namespace.Result); r.Err != nil || len(r.Grants) != 1 {
		t.Fatalf("release: %+v", r)
	}
	if _, ok := st.NextTimer(); !ok {
		t.Fatal("a grant left over, but NextTimer asks for no tick")
	}
	obs.batches = nil
	out = f.ApplyBatch([]*raft.Log{{Index: 8, Term: 1, Type: raft.LogCommand, Data: []byte{0xc1, 0xff}}})
	r := out[0].(*namespace.Result)
	if !errors.Is(r.Err, namespace.ErrMalformed) {
		t.Fatalf("proposer's result: %v, want ErrMalformed", r.Err)
	}
	if len(r.Grants) != 1 || r.Grants[0].Node != q[2].Node {
		t.Fatalf("proposer's result lost the grant: %+v", r)
	}
	if len(obs.batches) != 1 || len(obs.batches[0]) != 1 {
		t.Fatalf("observer saw %+v", obs.batches)
	}
	seen := obs.batches[0][0]
	if seen.Err != nil || len(seen.Grants) != 1 || seen.Grants[0].Node != q[2].Node || len(seen.Events) == 0 {
		t.Fatalf("observer's result: %+v, want the no-op's grant and events", seen)
	}
}
