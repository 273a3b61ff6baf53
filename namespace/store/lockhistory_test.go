package store

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/latch-io/latch/namespace"
)

func historyEvents(t *testing.T, s *Store, path string, subtree bool) []string {
	t.Helper()
	evs, err := s.LockHistory(path, subtree, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := len(evs) - 1; i >= 0; i-- { // oldest first
		out = append(out, evs[i].Event)
	}
	return out
}

// TestLockHistoryEveryEnd: each way a held lock can end is recorded with
// the grant it ends (token, session, identity, times); waiting requests
// that go away are not holds and leave no record.
func TestLockHistoryEveryEnd(t *testing.T) {
	h := newLockHarness(t, namespace.DefaultLimits())
	open := func(identity string) uint64 {
		return h.apply(&namespace.Command{Op: namespace.OpSessionOpen, TTLMillis: 10_000, Identity: identity}).Session
	}
	a, b := open("alice"), open("bob")

	// released, with a waiter granted next
	r := h.lock(a, "/x", namespace.LockExclusive, nil)
	w := h.lock(b, "/x", namespace.LockExclusive, nil)
	h.apply(&namespace.Command{Op: namespace.OpLockRelease, Session: a, Path: r.Path})
	// withdrawn while held (the client gave up or its stream broke)
	h.apply(&namespace.Command{Op: namespace.OpLockCancel, Session: b, Path: w.Path, Withdrawn: true})
	// a waiter canceled before its grant: no record
	r = h.lock(a, "/x", namespace.LockExclusive, nil)
	w = h.lock(b, "/x", namespace.LockExclusive, nil)
	h.apply(&namespace.Command{Op: namespace.OpLockCancel, Session: b, Path: w.Path})
	// session closed, then expired
	h.apply(&namespace.Command{Op: namespace.OpSessionClose, Session: a})
	c := open("carol")
	h.lock(c, "/x", namespace.LockExclusive, func(cmd *namespace.Command) { cmd.LockDelayMillis = namespace.NoLockDelay })
	h.apply(&namespace.Command{Op: namespace.OpSessionExpire, Sessions: []uint64{c}})
	// hold TTL ran out (a tick past the deadline)
	d := open("dave")
	h.lock(d, "/x", namespace.LockExclusive, func(cmd *namespace.Command) { cmd.HoldTTLMillis = 1; cmd.LockDelayMillis = namespace.NoLockDelay })
	h.now += 10_000_000
	h.apply(&namespace.Command{Op: namespace.OpNoop})
	// the request node deleted by a command
	r = h.lock(d, "/x", namespace.LockExclusive, nil)
	h.apply(&namespace.Command{Op: namespace.OpDelete, Path: r.Path, Version: namespace.AnyVersion, Identity: "root"})
	// a lock below /x
	h.lock(d, "/x/y", namespace.LockShared, nil)

	want := []string{"granted", "released", "granted", "canceled", "granted", "session-closed",
		"granted", "session-expired", "granted", "hold-ttl-expired", "granted", "deleted"}
	if got := historyEvents(t, h.s, "/x", false); !slices.Equal(got, want) {
		t.Fatalf("history of /x:\n got %v\nwant %v", got, want)
	}
	if got := historyEvents(t, h.s, "/x", true); len(got) != len(want)+1 {
		t.Fatalf("history of /x and below: %v", got)
	}
	evs, _ := h.s.LockHistory("/x", false, 0)
	newest := evs[0]
	if newest.Event != "deleted" || newest.By != "root" || newest.Identity != "dave" || newest.Token == 0 ||
		newest.GrantTime == 0 || newest.Time <= newest.GrantTime {
		t.Fatalf("deleted record: %+v", newest)
	}
	for i := 0; i+1 < len(evs); i += 2 { // each end pairs with the grant before it
		end, grant := evs[i], evs[i+1]
		if grant.Event != "granted" || end.Token != grant.Token || end.Session != grant.Session ||
			end.Identity != grant.Identity || end.GrantTime != grant.Time || end.Seq <= grant.Seq {
			t.Errorf("end %+v does not match grant %+v", end, grant)
		}
	}
	if got, _ := h.s.LockHistory("/x", false, 3); len(got) != 3 || got[0].Seq != newest.Seq {
		t.Fatalf("limit 3: %+v", got)
	}
}

// TestLockHistoryWindow: the window keeps LockHistoryMax records, drops
// records older than LockHistoryMaxAgeMillis, and follows a change of the
// settings through the log.
func TestLockHistoryWindow(t *testing.T) {
	lim := namespace.DefaultLimits()
	lim.LockHistoryMax = 4
	h := newLockHarness(t, lim)
	s := h.session()
	for range 5 {
		r := h.lock(s, "/w", namespace.LockExclusive, nil)
		h.apply(&namespace.Command{Op: namespace.OpLockRelease, Session: s, Path: r.Path})
	}
	evs, _ := h.s.LockHistory("/w", false, 0)
	if len(evs) != 4 || evs[0].Event != "released" || evs[3].Event != "granted" || evs[0].Seq != 9 {
		t.Fatalf("window of 4: %+v", evs)
	}

	// By age: records older than 5ms (leader time) go on the next record.
	lim.LockHistoryMax, lim.LockHistoryMaxAgeMillis = 100, 5
	h.apply(&namespace.Command{Op: namespace.OpSetLimits, Limits: &lim, Version: namespace.AnyVersion})
	h.now += 50_000_000
	r := h.lock(s, "/w", namespace.LockExclusive, nil)
	evs, _ = h.s.LockHistory("/w", false, 0)
	if len(evs) != 1 || evs[0].Token != r.Index {
		t.Fatalf("after the age bound: %+v", evs)
	}

	// 0 records nothing and empties the window.
	lim.LockHistoryMax, lim.LockHistoryMaxAgeMillis = 0, 0
	h.apply(&namespace.Command{Op: namespace.OpSetLimits, Limits: &lim, Version: namespace.AnyVersion})
	h.apply(&namespace.Command{Op: namespace.OpLockRelease, Session: s, Path: r.Path})
	if evs, _ := h.s.LockHistory("/w", false, 0); len(evs) != 0 {
		t.Fatalf("LockHistoryMax 0: %+v", evs)
	}
}

// TestLockHistoryRecordEncoding: the records, written by one encoder
// reused across commands into carved buffers, are byte for byte what a
// fresh encoder makes of them (the state hash covers them).
func TestLockHistoryRecordEncoding(t *testing.T) {
	w := newLockWorkload(t, 11, modelLimits(3))
	for range 800 {
		w.step()
	}
	n := 0
	err := w.s.db.View(func(txn *badger.Txn) error {
		return scan(txn, []byte{spaceHistory}, func(k, v []byte) error {
			var ev namespace.LockEvent
			if err := decodeLockEvent(v, &ev); err != nil {
				return err
			}
			var fresh []byte
			if err := codec.NewEncoderBytes(&fresh, namespace.EntryHandle()).Encode(&ev); err != nil {
				return err
			}
			if !bytes.Equal(fresh, v) {
				return fmt.Errorf("record %x: stored %x, a fresh encoder makes %x", k, v, fresh)
			}
			n++
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Fatalf("only %d history records: the test checks little", n)
	}
}
