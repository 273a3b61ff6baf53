package store

import (
	"testing"

	"github.com/latch-io/latch/namespace"
)

// TestHashCheckView: OpHashCheck hands back a view of exactly the state
// at its index (later commands of the same batch not included), equal
// states hash equal, and a difference anywhere changes the hash.
func TestHashCheckView(t *testing.T) {
	log := func(extra string) []namespace.BatchEntry {
		return []namespace.BatchEntry{
			{Index: 1, Time: 1, Cmd: &namespace.Command{Op: namespace.OpCreate, Path: "/a", Data: []byte("x" + extra)}},
			{Index: 2, Time: 2, Cmd: &namespace.Command{Op: namespace.OpHashCheck}},
			{Index: 3, Time: 3, Cmd: &namespace.Command{Op: namespace.OpCreate, Path: "/b"}},
		}
	}
	hashAt2 := func(extra string, batched bool) namespace.StateHash {
		s := openTestStore(t)
		var rs []*namespace.Result
		if batched {
			rs = s.ApplyBatch(log(extra))
		} else {
			for _, e := range log(extra) {
				rs = append(rs, s.Apply(e.Index, e.Time, e.Cmd))
			}
		}
		r := rs[1]
		if r.Err != nil || r.HashView == nil {
			t.Fatalf("hash-check: %v, view %v", r.Err, r.HashView)
		}
		defer r.HashView.Release()
		if r.HashView.Index() != 2 {
			t.Fatalf("view at index %d, want 2", r.HashView.Index())
		}
		h, err := r.HashView.Hash()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	a, b := hashAt2("", true), hashAt2("", false)
	if a != b {
		t.Fatalf("batched %v != one by one %v: the view saw a later command", a, b)
	}
	if c := hashAt2("y", true); c == a {
		t.Fatal("different states, same hash")
	}
}
