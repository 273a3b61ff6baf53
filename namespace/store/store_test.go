package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/latch-io/latch/namespace"
)

// randomLog builds a seeded command log over a small path universe so that
// commands often collide: creates on existing nodes, deletes of parents,
// version mismatches, ephemerals of sessions that end, multis that fail.
func randomLog(seed uint64, n int) []namespace.BatchEntry {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	names := []string{"a", "b", "c", "q-"}
	path := func() string {
		var b strings.Builder
		for range 1 + rng.IntN(3) {
			b.WriteString("/" + names[rng.IntN(len(names))])
		}
		return b.String()
	}
	version := func() int64 { return int64(rng.IntN(4)) - 1 }
	var sessions []uint64
	session := func() uint64 {
		if len(sessions) == 0 || rng.IntN(10) == 0 {
			return uint64(rng.IntN(50))
		}
		return sessions[rng.IntN(len(sessions))]
	}
	create := func() namespace.Command {
		c := namespace.Command{Op: namespace.OpCreate, Path: path(), Data: []byte(fmt.Sprint(rng.IntN(100)))}
		if rng.IntN(3) == 0 {
			c.Flags |= namespace.FlagSequential
		}
		if rng.IntN(3) == 0 {
			c.Flags |= namespace.FlagEphemeral
			c.Session = session()
		}
		return c
	}
	simple := func() namespace.Command {
		switch rng.IntN(10) {
		case 0, 1, 2, 3:
			return create()
		case 4, 5:
			return namespace.Command{Op: namespace.OpSet, Path: path(), Data: []byte(fmt.Sprint(rng.IntN(100))), Version: version()}
		case 6, 7, 8:
			return namespace.Command{Op: namespace.OpDelete, Path: path(), Version: version()}
		default:
			return namespace.Command{Op: namespace.OpCheck, Path: path(), Version: version()}
		}
	}
	var log []namespace.BatchEntry
	index, now := uint64(0), int64(1_000_000)
	for range n {
		index += 1 + uint64(rng.IntN(10)/9) // occasional gaps, like raft's own entries
		now += int64(rng.IntN(2000)) - 500  // leaders' clocks differ
		var c namespace.Command
		switch r := rng.IntN(100); {
		case r < 60:
			c = simple()
		case r < 72:
			c = namespace.Command{Op: namespace.OpMulti}
			for range rng.IntN(4) {
				c.Ops = append(c.Ops, simple())
			}
		case r < 80:
			c = namespace.Command{Op: namespace.OpSessionOpen, TTLMillis: int64(1000 + rng.IntN(9000)), Secret: []byte(fmt.Sprint(rng.Uint64()))}
			sessions = append(sessions, index)
		case r < 85:
			c = namespace.Command{Op: namespace.OpSessionClose, Session: session()}
		case r < 90:
			c = namespace.Command{Op: namespace.OpSessionExpire}
			for range 1 + rng.IntN(3) {
				c.Sessions = append(c.Sessions, session())
			}
		case r < 93:
			c = namespace.Command{Op: namespace.OpSetMember, Member: &namespace.Member{ID: names[rng.IntN(len(names))], RaftAddr: fmt.Sprint(rng.IntN(10))}}
		case r < 95:
			c = namespace.Command{Op: namespace.OpRemoveMember, Member: &namespace.Member{ID: names[rng.IntN(len(names))]}}
		default:
			c = namespace.Command{Op: namespace.OpNoop}
		}
		log = append(log, namespace.BatchEntry{Index: index, Time: now, Cmd: &c})
	}
	return log
}

// rawListing lists every badger key and value: replicas must agree byte
// for byte, not just in what Dump shows.
func rawListing(t testing.TB, s *Store) string {
	t.Helper()
	var b strings.Builder
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "%q=%x\n", it.Item().Key(), v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// snapshotBytes takes a snapshot of s and returns all of it.
func snapshotBytes(t testing.TB, s *Store) []byte {
	t.Helper()
	snap, err := s.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var buf bytes.Buffer
	if _, err := snap.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func dump(t testing.TB, s *Store) string {
	t.Helper()
	var b bytes.Buffer
	if err := s.Dump(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func resultSummary(r *namespace.Result) string {
	var b strings.Builder
	writeResult(&b, r)
	return b.String()
}

// applyInBatches applies log in batches of random sizes.
func applyInBatches(s *Store, log []namespace.BatchEntry, seed uint64) []*namespace.Result {
	rng := rand.New(rand.NewPCG(seed, 1))
	var out []*namespace.Result
	for len(log) > 0 {
		n := min(len(log), 1+rng.IntN(64))
		out = append(out, s.ApplyBatch(log[:n])...)
		log = log[n:]
	}
	return out
}

func TestDeterminism(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			log := randomLog(seed, 1500)
			one, batched, split := openTestStore(t), openTestStore(t), openTestStore(t)
			// A tiny transaction budget forces ApplyBatch to commit many
			// times per batch; the outcome must not change.
			split.maxTxnCount, split.maxTxnBytes = 7, 600

			var want []string
			for _, e := range log {
				want = append(want, resultSummary(one.Apply(e.Index, e.Time, e.Cmd)))
			}
			for name, s := range map[string]*Store{"batched": batched, "split": split} {
				for i, r := range applyInBatches(s, log, seed) {
					if got := resultSummary(r); got != want[i] {
						t.Fatalf("%s: entry %d (%s): result\n%s\nwant\n%s", name, log[i].Index, log[i].Cmd.Op, got, want[i])
					}
				}
				if d1, d2 := dump(t, one), dump(t, s); d1 != d2 {
					t.Fatalf("%s: dumps differ:\n%s\n---\n%s", name, d1, d2)
				}
				if r1, r2 := rawListing(t, one), rawListing(t, s); r1 != r2 {
					t.Fatalf("%s: raw key/value listings differ:\n%s\n---\n%s", name, r1, r2)
				}
			}
			// The log must exercise the interesting paths, or this test
			// proves little.
			d := dump(t, one)
			for _, want := range []string{"session ", "  ephemeral ", "member "} {
				if !strings.Contains(d, want) {
					t.Errorf("final state has no %q; make the log richer:\n%s", want, d)
				}
			}
			if one.AppliedIndex() != log[len(log)-1].Index {
				t.Errorf("AppliedIndex = %d, want %d", one.AppliedIndex(), log[len(log)-1].Index)
			}
		})
	}
}

func TestRandomLogCoverage(t *testing.T) {
	s := openTestStore(t)
	seen := map[string]bool{}
	for _, e := range randomLog(1, 1500) {
		r := s.Apply(e.Index, e.Time, e.Cmd)
		key := e.Cmd.Op.String() + " ok"
		if r.Err != nil {
			key = e.Cmd.Op.String() + " " + sentinelName(r.Err)
		}
		seen[key] = true
	}
	for _, k := range []string{
		"create ok", "create ErrNodeExists", "create ErrNoNode", "create ErrNoSession", "create ErrEphemeralParent",
		"set ok", "set ErrBadVersion", "delete ok", "delete ErrNotEmpty", "check ok", "multi ok", "multi ErrNoNode",
		"session-open ok", "session-close ok", "session-close ErrNoSession", "session-expire ok",
	} {
		if !seen[k] {
			t.Errorf("random log never produced %q", k)
		}
	}
}

func TestRestart(t *testing.T) {
	dir := t.TempDir()
	log := randomLog(7, 600)
	first, rest := log[:400], log[400:]

	s, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	applyInBatches(s, first, 7)
	before, raw := dump(t, s), rawListing(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, want := s.AppliedIndex(), first[len(first)-1].Index; got != want {
		t.Fatalf("AppliedIndex after reopen = %d, want %d", got, want)
	}
	if got := dump(t, s); got != before {
		t.Fatalf("state changed across restart:\n%s\n---\n%s", before, got)
	}
	// Raft replays from its last snapshot: already applied entries must be
	// skipped, leaving node versions and everything else untouched.
	for i, r := range s.ApplyBatch(first) {
		if !errors.Is(r.Err, namespace.ErrAlreadyApplied) || len(r.Events) != 0 {
			t.Fatalf("replayed entry %d: %v, %d events; want ErrAlreadyApplied", first[i].Index, r.Err, len(r.Events))
		}
	}
	if got := rawListing(t, s); got != raw {
		t.Fatal("replaying applied entries changed the state")
	}
	applyInBatches(s, rest, 8)

	ref := openTestStore(t)
	for _, e := range log {
		ref.Apply(e.Index, e.Time, e.Cmd)
	}
	if got, want := rawListing(t, s), rawListing(t, ref); got != want {
		t.Fatalf("restarted store diverged from one that never restarted:\n%s\n---\n%s", got, want)
	}
}

func TestSnapshotRestore(t *testing.T) {
	src := openTestStore(t)
	log := randomLog(11, 800)
	applyInBatches(src, log[:600], 1)
	want, wantRaw := dump(t, src), rawListing(t, src)

	snap, err := src.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if snap.Index() != src.AppliedIndex() {
		t.Fatalf("snapshot index %d, applied %d", snap.Index(), src.AppliedIndex())
	}
	// Commands applied after the snapshot was taken are not in it.
	applyInBatches(src, log[600:], 2)
	var buf bytes.Buffer
	n, err := snap.WriteTo(&buf)
	snap.Release()
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("WriteTo = %d, %v; buffer has %d", n, err, buf.Len())
	}

	// Into a fresh store, and into one with a different, larger state: the
	// restore must replace it whole.
	fresh := openTestStore(t)
	other := openTestStore(t)
	applyInBatches(other, randomLog(99, 900), 3)
	for name, dst := range map[string]*Store{"fresh": fresh, "other": other} {
		if err := dst.Restore(bytes.NewReader(buf.Bytes())); err != nil {
			t.Fatalf("%s: Restore: %v", name, err)
		}
		if got := dump(t, dst); got != want {
			t.Fatalf("%s: restored dump differs:\n%s\n---\n%s", name, got, want)
		}
		if got := rawListing(t, dst); got != wantRaw {
			t.Fatalf("%s: restored raw listing differs", name)
		}
		if dst.AppliedIndex() != log[599].Index {
			t.Fatalf("%s: AppliedIndex %d, want %d", name, dst.AppliedIndex(), log[599].Index)
		}
		// The restored store goes on exactly like the source did.
		applyInBatches(dst, log[600:], 4)
		if got, want := rawListing(t, dst), rawListing(t, src); got != want {
			t.Fatalf("%s: after replaying the tail, state differs from the source", name)
		}
	}
}

func TestRestoreRejectsBadSnapshots(t *testing.T) {
	src := openTestStore(t)
	applyInBatches(src, randomLog(3, 200), 1)
	good := snapshotBytes(t, src)

	dst := openTestStore(t)
	dst.Apply(1, 1, &namespace.Command{Op: namespace.OpCreate, Path: "/keep"})
	before := dump(t, dst)
	if err := dst.Restore(strings.NewReader("not a snapshot at all, no")); !errors.Is(err, namespace.ErrBadSnapshot) {
		t.Fatalf("Restore(garbage) = %v, want ErrBadSnapshot", err)
	}
	if got := dump(t, dst); got != before {
		t.Fatal("a snapshot with a bad header changed the state")
	}

	corrupt := bytes.Clone(good)
	corrupt[len(corrupt)/2] ^= 0x40
	for name, b := range map[string][]byte{"corrupt": corrupt, "truncated": good[:len(good)-9]} {
		if err := dst.Restore(bytes.NewReader(b)); !errors.Is(err, namespace.ErrBadSnapshot) {
			t.Fatalf("Restore(%s) = %v, want ErrBadSnapshot", name, err)
		}
		// The old state is gone and the new one incomplete: the store
		// must refuse to go on rather than apply onto half a state.
		if r := dst.Apply(1000, 1, &namespace.Command{Op: namespace.OpNoop}); !errors.Is(r.Err, namespace.ErrStorage) {
			t.Fatalf("Apply after failed restore = %v, want ErrStorage", r.Err)
		}
	}
	if err := dst.Restore(bytes.NewReader(good)); err != nil {
		t.Fatal(err)
	}
	if dump(t, dst) != dump(t, src) {
		t.Fatal("restore after a failed one did not produce the snapshot's state")
	}
	if r := dst.Apply(dst.AppliedIndex()+1, 1, &namespace.Command{Op: namespace.OpNoop}); r.Err != nil {
		t.Fatalf("Apply after a good restore: %v", r.Err)
	}
}

// bigSession opens a session and gives it n ephemerals spread over parents.
func bigSession(t testing.TB, s *Store, n, parents int) (session uint64, next uint64) {
	t.Helper()
	idx := s.AppliedIndex() + 1
	var batch []namespace.BatchEntry
	for p := range parents {
		batch = append(batch, namespace.BatchEntry{Index: idx, Time: 1, Cmd: &namespace.Command{Op: namespace.OpCreate, Path: fmt.Sprintf("/p%d", p)}})
		idx++
	}
	session = idx
	batch = append(batch, namespace.BatchEntry{Index: idx, Time: 1, Cmd: &namespace.Command{Op: namespace.OpSessionOpen, TTLMillis: 1000}})
	idx++
	for i := range n {
		batch = append(batch, namespace.BatchEntry{Index: idx, Time: 2, Cmd: &namespace.Command{
			Op: namespace.OpCreate, Path: fmt.Sprintf("/p%d/e-", i%parents), Flags: namespace.FlagEphemeral | namespace.FlagSequential, Session: session,
		}})
		idx++
	}
	for i, r := range s.ApplyBatch(batch) {
		if r.Err != nil {
			t.Fatalf("setup entry %d: %v", batch[i].Index, r.Err)
		}
	}
	return session, idx
}

// TestHugeSessionEnd ends a session with many ephemerals: the close ends
// the session at once and deletes MaxLockBatch of them, each tick after
// deletes the next MaxLockBatch (NextTimer asks for ticks until none is
// left), the Deleted events come in key order across the chunks, and the
// state at the end is whole.
func TestHugeSessionEnd(t *testing.T) {
	s := openTestStore(t)
	const n, parents = 15000, 7
	k := s.Limits().MaxLockBatch
	id, idx := bigSession(t, s, n, parents)
	want, err := s.SessionEphemerals(id)
	if err != nil || len(want) != n {
		t.Fatalf("%d ephemerals (%v), want %d", len(want), err, n)
	}
	r := s.Apply(idx, 3, &namespace.Command{Op: namespace.OpSessionClose, Session: id})
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := len(r.Events); got != 2*k+1 || r.Events[2*k].Type != namespace.EventSessionClosed {
		t.Fatalf("close: %d events, want %d ending with session-closed", got, 2*k+1)
	}
	if _, err := s.Session(id); !errors.Is(err, namespace.ErrNoSession) {
		t.Fatalf("session after close: %v, want ErrNoSession", err)
	}
	if r := s.Apply(idx+1, 3, &namespace.Command{Op: namespace.OpCreate, Path: "/p0/late", Flags: namespace.FlagEphemeral, Session: id}); !errors.Is(r.Err, namespace.ErrNoSession) {
		t.Fatalf("create by the ended session: %v, want ErrNoSession", r.Err)
	}
	idx++
	events := r.Events
	ticks := 0
	for {
		if _, ok := s.NextTimer(); !ok {
			break
		}
		idx++
		ticks++
		r := s.Apply(idx, 3, &namespace.Command{Op: namespace.OpNoop})
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if len(r.Events) > 2*k {
			t.Fatalf("tick %d: %d events, more than MaxLockBatch %d deletions", ticks, len(r.Events), k)
		}
		events = append(events, r.Events...)
		if ticks > n {
			t.Fatal("ticks never finish the session")
		}
	}
	if wantTicks := (n - 1) / k; ticks != wantTicks {
		t.Fatalf("%d ticks, want %d", ticks, wantTicks)
	}
	var deleted []string
	for _, ev := range events {
		if ev.Type == namespace.EventDeleted {
			deleted = append(deleted, ev.Path)
		}
	}
	if !slices.Equal(deleted, want) {
		t.Fatalf("%d Deleted events, not the %d ephemerals in key order", len(deleted), len(want))
	}
	if eph, _ := s.SessionEphemerals(id); len(eph) != 0 {
		t.Fatalf("%d ephemerals left", len(eph))
	}
	for p := range parents {
		st, err := s.Stat(fmt.Sprintf("/p%d", p))
		if err != nil {
			t.Fatal(err)
		}
		if per := int64(n / parents); st.NumChildren != 0 || st.CVersion < 2*per {
			t.Fatalf("/p%d: %+v", p, st)
		}
	}
	if s.AppliedIndex() != idx {
		t.Fatalf("AppliedIndex %d, want %d", s.AppliedIndex(), idx)
	}
	if strings.Contains(dump(t, s), "ending session") {
		t.Fatal("the session is still recorded as ending")
	}
}

// TestHugeSessionEndResumes crashes in the middle of ending a huge session,
// after some checkpoints committed; replaying the command after a restart
// must reach exactly the state of an uninterrupted run.
func TestHugeSessionEndResumes(t *testing.T) {
	const n, parents = 12000, 5
	// One chunk for the whole session, so it outgrows a transaction.
	lim := namespace.DefaultLimits()
	lim.MaxLockBatch = n
	ref, err := Open(Config{Dir: t.TempDir(), Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	id, idx := bigSession(t, ref, n, parents)
	expire := &namespace.Command{Op: namespace.OpSessionExpire, Sessions: []uint64{id}}
	if r := ref.Apply(idx, 3, expire); r.Err != nil {
		t.Fatal(r.Err)
	}

	dir := t.TempDir()
	s, err := Open(Config{Dir: dir, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	bigSession(t, s, n, parents)
	checkpoints := 0
	s.afterCheckpoint = func() error {
		checkpoints++
		return errors.New("simulated crash")
	}
	if r := s.Apply(idx, 3, expire); !errors.Is(r.Err, namespace.ErrStorage) {
		t.Fatalf("Apply = %v, want the simulated crash", r.Err)
	}
	if checkpoints != 1 {
		t.Fatalf("%d checkpoints before the crash, want 1", checkpoints)
	}
	if r := s.Apply(idx+1, 3, &namespace.Command{Op: namespace.OpNoop}); !errors.Is(r.Err, namespace.ErrStorage) {
		t.Fatalf("a broken store applied a command: %v", r.Err)
	}
	s.Close()

	s, err = Open(Config{Dir: dir, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.AppliedIndex() != idx-1 {
		t.Fatalf("AppliedIndex after crash = %d, want %d", s.AppliedIndex(), idx-1)
	}
	left, _ := s.SessionEphemerals(id)
	if len(left) == 0 || len(left) == n {
		t.Fatalf("%d of %d ephemerals left: the crash was not mid-command", len(left), n)
	}
	r := s.Apply(idx, 3, expire)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if len(r.Events) != 2*len(left)+1 {
		t.Fatalf("replay produced %d events, want %d", len(r.Events), 2*len(left)+1)
	}
	if got, want := rawListing(t, s), rawListing(t, ref); got != want {
		t.Fatal("resumed session end differs from an uninterrupted one")
	}
}

func TestChildrenPages(t *testing.T) {
	s := openTestStore(t)
	const n = 2500
	batch := []namespace.BatchEntry{{Index: 1, Cmd: &namespace.Command{Op: namespace.OpCreate, Path: "/dir"}}}
	for i := range n {
		batch = append(batch, namespace.BatchEntry{Index: uint64(i + 2), Cmd: &namespace.Command{Op: namespace.OpCreate, Path: fmt.Sprintf("/dir/%05d", i)}})
	}
	// A sibling whose name extends the parent's must not leak into the
	// listing: keys are parent+NUL+name.
	batch = append(batch, namespace.BatchEntry{Index: n + 2, Cmd: &namespace.Command{Op: namespace.OpCreate, Path: "/dir2"}},
		namespace.BatchEntry{Index: n + 3, Cmd: &namespace.Command{Op: namespace.OpCreate, Path: "/dir2/x"}})
	for _, r := range s.ApplyBatch(batch) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	var all []string
	after, pages := "", 0
	for {
		names, more, err := s.Children("/dir", after, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(names) > namespace.DefaultLimits().MaxChildrenPage {
			t.Fatalf("page of %d names", len(names))
		}
		all = append(all, names...)
		pages++
		if !more {
			break
		}
		after = names[len(names)-1]
	}
	if len(all) != n || pages != 3 {
		t.Fatalf("%d names in %d pages, want %d in 3", len(all), pages, n)
	}
	for i, name := range all {
		if name != fmt.Sprintf("%05d", i) {
			t.Fatalf("name %d = %q", i, name)
		}
	}
	if names, more, _ := s.Children("/dir", "", 10); len(names) != 10 || !more {
		t.Fatalf("limit 10: %d names, more=%t", len(names), more)
	}
}

// TestConcurrentReads reads while commands apply; run with -race.
func TestConcurrentReads(t *testing.T) {
	s := openTestStore(t)
	log := randomLog(5, 1000)
	stop := readWhile(t, func() error {
		s.Get("/a")
		s.Children("/a", "", 0)
		s.Sessions()
		return s.Dump(&bytes.Buffer{})
	})
	applyInBatches(s, log, 5)
	stop()
}

func TestClosedStore(t *testing.T) {
	s, err := Open(Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if r := s.Apply(1, 1, &namespace.Command{Op: namespace.OpNoop}); !errors.Is(r.Err, namespace.ErrClosed) {
		t.Errorf("Apply after Close = %v", r.Err)
	}
	if _, _, err := s.Get("/"); !errors.Is(err, namespace.ErrClosed) {
		t.Errorf("Get after Close = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// TestSnapshotLarge snapshots and restores a 100,000-node tree; each must
// take well under 5 s.
func TestSnapshotLarge(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("large tree; timing is meaningless under -race")
	}
	src := openTestStore(t)
	const nodes, parents = 100_000, 100
	fillTree(t, src, nodes, parents)

	start := time.Now()
	state := snapshotBytes(t, src)
	snapTime := time.Since(start)

	dst := openTestStore(t)
	start = time.Now()
	if err := dst.Restore(bytes.NewReader(state)); err != nil {
		t.Fatal(err)
	}
	restoreTime := time.Since(start)
	t.Logf("%d nodes: snapshot %v (%d bytes), restore %v", nodes, snapTime, len(state), restoreTime)
	if snapTime > 2*time.Second || restoreTime > 2*time.Second {
		t.Errorf("snapshot %v / restore %v; want well under 5s", snapTime, restoreTime)
	}
	st, err := dst.Stat("/d42")
	if err != nil || st.NumChildren != nodes/parents {
		t.Fatalf("restored /d42: %+v, %v", st, err)
	}
	if dst.AppliedIndex() != src.AppliedIndex() {
		t.Fatalf("restored AppliedIndex %d, want %d", dst.AppliedIndex(), src.AppliedIndex())
	}
}

// fillTree creates parents directories holding nodes nodes in total.
func fillTree(t testing.TB, s *Store, nodes, parents int) {
	t.Helper()
	idx := s.AppliedIndex() + 1
	var batch []namespace.BatchEntry
	flush := func() {
		for _, r := range s.ApplyBatch(batch) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		batch = batch[:0]
	}
	for p := range parents {
		batch = append(batch, namespace.BatchEntry{Index: idx, Time: int64(idx), Cmd: &namespace.Command{Op: namespace.OpCreate, Path: fmt.Sprintf("/d%d", p)}})
		idx++
	}
	data := []byte("some node data")
	for i := range nodes {
		batch = append(batch, namespace.BatchEntry{Index: idx, Time: int64(idx), Cmd: &namespace.Command{
			Op: namespace.OpCreate, Path: fmt.Sprintf("/d%d/n%d", i%parents, i), Data: data,
		}})
		idx++
		if len(batch) == 1000 {
			flush()
		}
	}
	flush()
}

// TestRestoreExcludesReads restores repeatedly while readers run: badger
// panics on reads during DropAll, so Restore must hold them off, and a
// snapshot taken before a restore must refuse to stream.
func TestRestoreExcludesReads(t *testing.T) {
	src := openTestStore(t)
	applyInBatches(src, randomLog(21, 300), 1)
	state := snapshotBytes(t, src)

	dst := openTestStore(t)
	applyInBatches(dst, randomLog(22, 300), 1)
	stale, err := dst.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Release()

	stop := readWhile(t, func() error {
		if err := dst.Dump(io.Discard); err != nil {
			return err
		}
		dst.Children("/a", "", 0)
		return nil
	})
	for range 5 {
		if err := dst.Restore(bytes.NewReader(state)); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	if _, err := stale.WriteTo(io.Discard); !errors.Is(err, namespace.ErrBadSnapshot) {
		t.Fatalf("WriteTo of a snapshot taken before a restore = %v, want ErrBadSnapshot", err)
	}
	if dump(t, dst) != dump(t, src) {
		t.Fatal("restored state differs from the source")
	}
}

// readWhile runs read in a loop on two goroutines until the returned stop
// is called (which waits for them); a read's error fails t and ends its
// goroutine. Run with -race: the reads race what the test applies.
func readWhile(t *testing.T, read func() error) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := read(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	return func() { close(done); wg.Wait() }
}
