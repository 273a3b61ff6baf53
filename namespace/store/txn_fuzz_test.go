package store

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/latch-io/latch/namespace"
)

// FuzzTxn applies txns built from the input to a store and checks each
// against a model of three sibling nodes written independently of txn.go:
// the refusal (which sentinel, or none), the branch, every op's result,
// and the state afterwards (unchanged when the txn failed). One store
// serves every input, so txns build on the states earlier ones left.
func FuzzTxn(f *testing.F) {
	for _, seed := range [][]byte{
		{},
		{1, 0, 5, 0, 0, 0, 1, 1, 0, 0, 0, 0}, // if exists /f/a = 1 then create /f/a
		{2, 0, 1, 0, 1, 0, 0, 1, 1, 1, 1, 2, 0, 4}, // value compares, set, get
		{3, 1, 2, 2, 0, 3, 2, 3, 1, 0, 0, 5, 2, 2, 1, 3, 0, 2, 1, 1, 4},
		{1, 2, 9, 0, 0, 0, 0, 0},    // a bad target
		{0, 3, 5, 0, 1, 0, 2, 2, 0}, // ops only
	} {
		f.Add(seed)
	}
	s := openTestStore(f)
	r := s.Apply(1, 1, &namespace.Command{Op: namespace.OpCreate, Path: "/f", Version: namespace.AnyVersion})
	if r.Err != nil {
		f.Fatal(r.Err)
	}
	var mu sync.Mutex
	index := uint64(1)
	f.Fuzz(func(t *testing.T, in []byte) {
		mu.Lock()
		defer mu.Unlock()
		index++
		g := &txnGen{b: in}
		cmd := g.txn()
		before := readTxnModel(t, s)
		want := before.apply(cmd, index)
		got := s.Apply(index, int64(index)*1000, cmd)
		after := readTxnModel(t, s)
		if msg := want.diff(got, after, before); msg != "" {
			t.Fatalf("txn %+v on %v:\n%s", cmd, before, msg)
		}
	})
}

var txnFuzzPaths = [...]string{"/f/a", "/f/b", "/f/c"}
var txnFuzzValues = [...]string{"", "x", "y", "xy"}

// txnGen reads a txn from fuzz bytes (zeros once they run out).
type txnGen struct{ b []byte }

func (g *txnGen) next() int {
	if len(g.b) == 0 {
		return 0
	}
	c := g.b[0]
	g.b = g.b[1:]
	return int(c)
}

func (g *txnGen) txn() *namespace.Command {
	cmd := &namespace.Command{Op: namespace.OpTxn, Version: namespace.AnyVersion}
	for range g.next() % 4 {
		c := namespace.Compare{Path: txnFuzzPaths[g.next()%3], Target: namespace.CmpTarget(g.next() % 8), Op: namespace.CmpOp(g.next() % 5)}
		c.Number = int64(g.next()%5) - 1
		if v := g.next() % 5; v < 4 {
			c.Value = []byte(txnFuzzValues[v])
		}
		cmd.Compares = append(cmd.Compares, c)
	}
	for _, branch := range []*[]namespace.Command{&cmd.Ops, &cmd.Else} {
		for range g.next() % 4 {
			op := namespace.Command{Op: [...]namespace.Op{namespace.OpCreate, namespace.OpSet, namespace.OpDelete, namespace.OpCheck, namespace.OpGet, namespace.OpLockRequest}[g.next()%6],
				Path: txnFuzzPaths[g.next()%3], Version: int64(g.next()%4) - 1}
			if op.Op == namespace.OpCreate || op.Op == namespace.OpSet {
				op.Data = []byte(txnFuzzValues[g.next()%4])
			}
			*branch = append(*branch, op)
		}
	}
	return cmd
}

// txnModelNode is one node of the model; nil in txnModel: absent.
type txnModelNode struct {
	data              string
	version           int64
	createRev, modRev uint64
}

type txnModel map[string]*txnModelNode

func readTxnModel(t *testing.T, s *Store) txnModel {
	m := txnModel{}
	for _, p := range txnFuzzPaths {
		data, st, err := s.Get(p)
		switch {
		case errors.Is(err, namespace.ErrNoNode):
		case err != nil:
			t.Fatal(err)
		default:
			m[p] = &txnModelNode{data: string(data), version: st.Version, createRev: st.CreateRev, modRev: st.ModRev}
		}
	}
	return m
}

func (m txnModel) String() string {
	var b bytes.Buffer
	for _, p := range txnFuzzPaths {
		if n := m[p]; n != nil {
			fmt.Fprintf(&b, "%s=%q v%d c%d m%d ", p, n.data, n.version, n.createRev, n.modRev)
		}
	}
	return b.String()
}

// txnWant is what the model expects.
type txnWant struct {
	err       error // the sentinel, or nil
	decided   bool  // the compares were evaluated
	succeeded bool
	results   []txnModelNode // per op on success (get and set and check: the node; create: the node)
	state     txnModel       // after
}

// apply is the model: refusals first (ops, then compares in order), then
// the branch, op by op on a copy.
func (m txnModel) apply(cmd *namespace.Command, index uint64) txnWant {
	for _, ops := range [2][]namespace.Command{cmd.Ops, cmd.Else} {
		for _, op := range ops {
			if op.Op == namespace.OpLockRequest {
				return txnWant{err: namespace.ErrBadCommand, state: m}
			}
		}
	}
	ok := true
	for _, c := range cmd.Compares {
		if !modelCompareValid(c) {
			return txnWant{err: namespace.ErrBadCommand, state: m}
		}
		ok = ok && modelCompare(m[c.Path], c)
	}
	w := txnWant{decided: true, succeeded: ok}
	ops := cmd.Ops
	if !ok {
		ops = cmd.Else
	}
	next := txnModel{}
	for p, n := range m {
		cp := *n
		next[p] = &cp
	}
	for _, op := range ops {
		n := next[op.Path]
		versionOK := n != nil && (op.Version == namespace.AnyVersion || op.Version == n.version)
		var err error
		switch {
		case op.Op == namespace.OpCreate && n != nil:
			err = namespace.ErrNodeExists
		case op.Op == namespace.OpCreate:
			n = &txnModelNode{data: string(op.Data), createRev: index, modRev: index}
			next[op.Path] = n
		case n == nil:
			err = namespace.ErrNoNode
		case !versionOK:
			err = namespace.ErrBadVersion
		case op.Op == namespace.OpSet:
			n.data, n.version, n.modRev = string(op.Data), n.version+1, index
		case op.Op == namespace.OpDelete:
			delete(next, op.Path)
			n = nil
		}
		if err != nil {
			w.err, w.state, w.results = err, m, nil
			return w
		}
		if n != nil {
			w.results = append(w.results, *n)
		} else {
			w.results = append(w.results, txnModelNode{})
		}
	}
	w.state = next
	return w
}

func modelCompareValid(c namespace.Compare) bool {
	switch {
	case c.Target < 1 || c.Target > 6 || c.Op > 3:
		return false
	case c.Target == namespace.CmpExists:
		return (c.Op == namespace.CmpEqual || c.Op == namespace.CmpNotEqual) && (c.Number == 0 || c.Number == 1) && len(c.Value) == 0
	}
	return c.Target == namespace.CmpValue || len(c.Value) == 0
}

func modelCompare(n *txnModelNode, c namespace.Compare) bool {
	if c.Target == namespace.CmpExists {
		present := n != nil
		return present == (c.Number == 1) == (c.Op == namespace.CmpEqual)
	}
	if n == nil {
		return false
	}
	var order int
	num := func(v int64) int {
		switch {
		case v < c.Number:
			return -1
		case v > c.Number:
			return 1
		}
		return 0
	}
	switch c.Target {
	case namespace.CmpValue:
		order = bytes.Compare([]byte(n.data), c.Value)
	case namespace.CmpVersion:
		order = num(n.version)
	case namespace.CmpCreateRev:
		order = num(int64(n.createRev))
	case namespace.CmpModRev:
		order = num(int64(n.modRev))
	case namespace.CmpOwner:
		order = num(0) // every node here is persistent
	}
	return [...]bool{order == 0, order != 0, order > 0, order < 0}[c.Op]
}

// diff compares the store's answer and state with the model's.
func (w txnWant) diff(got *namespace.Result, after, before txnModel) string {
	if !errors.Is(got.Err, w.err) || (w.err == nil) != (got.Err == nil) {
		return fmt.Sprintf("err %v, want %v", got.Err, w.err)
	}
	if w.decided && got.Succeeded != w.succeeded {
		return fmt.Sprintf("succeeded %t, want %t", got.Succeeded, w.succeeded)
	}
	if got.Err == nil {
		if len(got.Results) != len(w.results) {
			return fmt.Sprintf("%d results, want %d", len(got.Results), len(w.results))
		}
		for i, r := range got.Results {
			want := w.results[i]
			if want == (txnModelNode{}) {
				continue // a delete
			}
			if r.Stat.Version != want.version || r.Stat.CreateRev != want.createRev || r.Stat.ModRev != want.modRev {
				return fmt.Sprintf("result %d stat %+v, want %+v", i, r.Stat, want)
			}
			if r.Data != nil && string(r.Data) != want.data {
				return fmt.Sprintf("result %d data %q, want %q", i, r.Data, want.data)
			}
		}
	}
	if after.String() != w.state.String() {
		return fmt.Sprintf("state after\n%v\nwant\n%v", after, w.state)
	}
	return ""
}
