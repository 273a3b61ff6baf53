package chaos

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestHistoryRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.jsonl")
	h, err := CreateHistory(path, "w1")
	if err != nil {
		t.Fatal(err)
	}
	open, _ := h.Invoke(OpSessionOpen, Args{}, 0, 0)
	h.Complete(open, OutcomeOK, Result{}, 0, 42, nil)
	acq, _ := h.Invoke(OpAcquire, Args{Key: "/chaos/locks/a", Mode: ModeExclusive}, 0, 42)
	h.Complete(acq, OutcomeOK, Result{}, 17, 0, nil)
	h.Event(EvLockLost, Result{}, 17, 42)
	h.Invoke(OpStoreWrite, Args{Key: "a", Value: "3"}, 17, 42) // never completed: killed
	h.Close()
	// A torn last line, as if killed mid-write, is dropped.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"seq":9,"worker":"w1","pha`)
	f.Close()

	ops, err := ReadHistoryFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 4 {
		t.Fatalf("ops = %+v, want 4", ops)
	}
	byOp := map[string]Op{}
	for _, o := range ops {
		byOp[o.Op] = o
	}
	if o := byOp[OpSessionOpen]; o.Session != 42 || o.Outcome != OutcomeOK || o.Complete < o.Invoke {
		t.Errorf("session-open = %+v", o)
	}
	if o := byOp[OpAcquire]; o.Token != 17 || o.Args.Mode != ModeExclusive || o.Session != 42 {
		t.Errorf("acquire = %+v: the grant's token comes with the completion", o)
	}
	if o := byOp[EvLockLost]; !o.IsEvent() || o.Token != 17 || o.Invoke != o.Complete {
		t.Errorf("lost event = %+v", o)
	}
	if o := byOp[OpStoreWrite]; o.Outcome != OutcomeUnknown || o.Complete != 0 {
		t.Errorf("uncompleted write = %+v, want unknown with no completion time", o)
	}

	// A bad line that is not the last is an error, not silently skipped.
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, []byte("{nope\n"+`{"seq":1,"worker":"w","phase":"event","op":"lock-lost","time":1}`+"\n"), 0o644)
	if _, err := ReadHistoryFiles(bad); !errors.Is(err, ErrBadHistory) {
		t.Fatalf("corrupt middle line: err = %v, want ErrBadHistory", err)
	}
	orphan := filepath.Join(t.TempDir(), "orphan.jsonl")
	os.WriteFile(orphan, []byte(`{"seq":2,"worker":"w","phase":"complete","id":1,"time":1,"outcome":"ok"}`+"\n"), 0o644)
	if _, err := ReadHistoryFiles(orphan); !errors.Is(err, ErrBadHistory) {
		t.Fatalf("completion without invoke: err = %v, want ErrBadHistory", err)
	}
}

func TestScheduleFiresEveryKindEachRound(t *testing.T) {
	order := func(seed uint64) []FaultKind {
		s := newSchedule(FaultKinds, rand.New(rand.NewPCG(seed, 1)))
		var out []FaultKind
		for i := 0; i < 3*len(FaultKinds); i++ {
			k, ok := s.next()
			if !ok {
				t.Fatal("schedule with kinds returned none")
			}
			out = append(out, k)
		}
		return out
	}
	a := order(7)
	for r := 0; r < 3; r++ {
		round := slices.Clone(a[r*len(FaultKinds) : (r+1)*len(FaultKinds)])
		slices.Sort(round)
		want := slices.Clone(FaultKinds)
		slices.Sort(want)
		if !slices.Equal(round, want) {
			t.Fatalf("round %d = %v, want every kind once", r, round)
		}
	}
	if !slices.Equal(a, order(7)) {
		t.Fatal("same seed, different schedule")
	}
	if slices.Equal(a, order(8)) {
		t.Fatal("different seeds, same schedule")
	}
	if _, ok := newSchedule(nil, rand.New(rand.NewPCG(1, 1))).next(); ok {
		t.Fatal("empty schedule returned a fault")
	}
}

func TestConfigValidate(t *testing.T) {
	good := DefaultConfig()
	good.Out = t.TempDir()
	if err := good.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for _, tc := range []struct {
		field string
		edit  func(*Config)
	}{
		{"Members", func(c *Config) { c.Members = 4 }},
		{"Workers", func(c *Config) { c.Workers = 0 }},
		{"Workers", func(c *Config) { c.Workers = 2 }}, // three workloads
		{"Workloads", func(c *Config) { c.Workloads = []string{"kv", "bank"} }},
		{"Faults", func(c *Config) { c.Faults = []FaultKind{"meteor"} }},
		{"Duration", func(c *Config) { c.Duration = 0 }},
		{"FaultInterval", func(c *Config) { c.FaultInterval = 10 }},
		{"SessionTTL", func(c *Config) { c.SessionTTL = 100 }},
		{"Out", func(c *Config) { c.Out = "" }},
		{"InjectBug", func(c *Config) { c.InjectBug = "typo" }},
		{"InjectBug", func(c *Config) { c.InjectBug = BugSkipLock; c.Workloads = []string{"kv"} }},
		{"InjectBug", func(c *Config) { c.InjectBug = BugUseAfterLost; c.Faults = []FaultKind{FaultLeaderKill} }},
	} {
		c := good
		tc.edit(&c)
		err := c.Validate()
		if !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: err = %v, want ErrBadConfig naming the field", tc.field, err)
		}
	}
	if f, err := ParseFaults("none"); err != nil || len(f) != 0 {
		t.Errorf("ParseFaults(none) = %v, %v", f, err)
	}
	if f, err := ParseFaults("leader-kill, worker-pause"); err != nil || !slices.Equal(f, []FaultKind{FaultLeaderKill, FaultWorkerPause}) {
		t.Errorf("ParseFaults(list) = %v, %v", f, err)
	}
	if _, err := ParseFaults("leader-kil"); !errors.Is(err, ErrBadConfig) {
		t.Errorf("ParseFaults(typo) err = %v", err)
	}
}

func TestBuggyWorkersAlternate(t *testing.T) {
	c := DefaultConfig()
	c.Workers, c.Workloads, c.InjectBug = 6, []string{WorkloadLocks, WorkloadKV}, BugSkipLock
	var buggy []int
	for i := 0; i < c.Workers; i++ {
		if c.buggy(i) {
			buggy = append(buggy, i)
		}
	}
	// Locks workers are slots 0, 2, 4: the first and the third are buggy,
	// the second stays correct to collide with.
	if !slices.Equal(buggy, []int{0, 4}) {
		t.Fatalf("buggy slots = %v, want [0 4]", buggy)
	}
}
