package chaos

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Hand-made histories: each checker must pass a good one and name the
// violation in a bad one.

const sec = int64(time.Second)

var nextID uint64

// op builds one operation; invoke and complete are in seconds.
func op(worker, kind string, invoke, complete float64, outcome string, edits ...func(*Op)) Op {
	nextID++
	o := Op{Worker: worker, ID: nextID, Op: kind, Invoke: int64(invoke * float64(sec)),
		Complete: int64(complete * float64(sec)), Outcome: outcome}
	for _, e := range edits {
		e(&o)
	}
	return o
}

func key(k string) func(*Op)    { return func(o *Op) { o.Args.Key = k } }
func token(t uint64) func(*Op)  { return func(o *Op) { o.Token = t } }
func sess(s uint64) func(*Op)   { return func(o *Op) { o.Session = s } }
func mode(m string) func(*Op)   { return func(o *Op) { o.Args.Mode = m } }
func value(v string) func(*Op)  { return func(o *Op) { o.Args.Value = v } }
func version(v int64) func(*Op) { return func(o *Op) { o.Args.Version = v } }
func result(r Result) func(*Op) { return func(o *Op) { o.Result = r } }
func state(s string) func(*Op)  { return func(o *Op) { o.Result.State = s } }

func acquire(w, path string, tok uint64, at float64) Op {
	return op(w, OpAcquire, at, at+0.01, OutcomeOK, key(path), token(tok), mode(ModeExclusive))
}

func store(seq uint64, o, k string, tok uint64, client, data string, accepted bool) StoreRecord {
	return StoreRecord{Seq: seq, Op: o, Key: k, Token: tok, Client: client, Data: data, Accepted: accepted}
}

func kinds(v Verdict) []string {
	var out []string
	for _, x := range v.Violations {
		if !slices.Contains(out, x.Kind) {
			out = append(out, x.Kind)
		}
	}
	slices.Sort(out)
	return out
}

func wantPass(t *testing.T, v Verdict) {
	t.Helper()
	if v.Status != StatusPass {
		t.Fatalf("%s: %s (%s) %+v, want pass", v.Checker, v.Status, v.Summary, v.Violations)
	}
}

func wantViolations(t *testing.T, v Verdict, want ...string) {
	t.Helper()
	slices.Sort(want)
	if v.Status != StatusFail || !slices.Equal(kinds(v), want) {
		t.Fatalf("%s: status %s, violations %v (%+v), want %v", v.Checker, v.Status, kinds(v), v.Violations, want)
	}
}

func TestMutualExclusionGood(t *testing.T) {
	ev := &Evidence{
		Ops: []Op{
			acquire("w1", LocksRoot+"/a", 10, 1),
			acquire("w2", LocksRoot+"/a/x", 20, 2),
			acquire("w1", LocksRoot+"/b", 30, 3),
			op("w1", EvLockLost, 4, 4, OutcomeOK, token(30)),
			op("w3", OpCampaign, 1, 1.1, OutcomeOK, token(12)),
		},
		Store: []StoreRecord{
			store(1, "read", "a/x", 10, "w1", "", true),
			store(2, "write", "a/x", 10, "w1", "1", true),
			store(3, "read", "a", 10, "w1", "", true),
			store(4, "write", "a", 10, "w1", "1", true),
			store(5, "read", "a/x", 20, "w2", "1", true),
			store(6, "write", "a/x", 10, "w1", "2", false), // late old holder, fenced off
			store(7, "write", "a/x", 20, "w2", "2", true),
			store(8, "write", ElectionKey, 12, "w3", "12", true),
			store(9, "read", "b", 30, "w1", "", true),
			store(10, "write", "b", 30, "w1", "1", true),
		},
	}
	wantPass(t, checkMutualExclusion(ev))
}

func TestMutualExclusionLostUpdateAndOverlap(t *testing.T) {
	// skip-lock: w2 borrowed w1's token and interleaved with it.
	ev := &Evidence{
		Ops: []Op{acquire("w1", LocksRoot+"/a", 10, 1), acquire("w2", LocksRoot+"/a", 10, 1.5)},
		Store: []StoreRecord{
			store(1, "read", "a", 10, "w1", "4", true),
			store(2, "read", "a", 10, "w2", "4", true),
			store(3, "write", "a", 10, "w1", "1", true),
			store(4, "write", "a", 10, "w2", "1", true),
		},
	}
	wantViolations(t, checkMutualExclusion(ev), ViolationLostUpdate, ViolationOverlappingHolders)

	// The same interleaving by a client that never believed it held the
	// lock is a lost update but not two believed holders.
	ev.Ops = ev.Ops[:1]
	wantViolations(t, checkMutualExclusion(ev), ViolationLostUpdate)
}

func TestMutualExclusionFencingOrder(t *testing.T) {
	// ignore-tokens: a write with an older token was accepted after a
	// newer one.
	ev := &Evidence{
		Ops: []Op{acquire("w1", LocksRoot+"/b", 10, 1), acquire("w2", LocksRoot+"/b", 20, 2)},
		Store: []StoreRecord{
			store(1, "read", "b", 20, "w2", "", true),
			store(2, "write", "b", 20, "w2", "1", true),
			store(3, "read", "b", 10, "w1", "1", true),
			store(4, "write", "b", 10, "w1", "2", true),
			store(5, "write", ElectionKey, 9, "w3", "9", true),
			store(6, "write", ElectionKey, 8, "w4", "8", true),
		},
	}
	v := checkMutualExclusion(ev)
	wantViolations(t, v, ViolationFencingOrder)
	if len(v.Violations) != 2 || !strings.Contains(v.Violations[0].Detail, `"b"`) || !strings.Contains(v.Violations[1].Detail, ElectionKey) {
		t.Fatalf("violations %+v: want one on b and one on the election key", v.Violations)
	}
}

func TestMutualExclusionUseAfterLost(t *testing.T) {
	ev := &Evidence{
		Ops: []Op{
			acquire("w1", LocksRoot+"/a", 10, 1),
			op("w1", OpStoreRead, 1.1, 1.2, OutcomeOK, key("a"), token(10)),
			op("w1", EvLockLost, 5, 5, OutcomeOK, token(10)),
			op("w1", OpStoreWrite, 5.1, 5.2, OutcomeFail, key("a"), token(10)),
			// Another worker's use of its own token is fine.
			op("w2", OpStoreRead, 5.3, 5.4, OutcomeOK, key("a"), token(10)),
		},
	}
	v := checkMutualExclusion(ev)
	wantViolations(t, v, ViolationUseAfterLost)
	if len(v.Violations) != 1 || !strings.Contains(v.Violations[0].Detail, "w1") {
		t.Fatalf("violations %+v: want exactly w1's write", v.Violations)
	}
}

// kv helpers: a get returning value v at version ver, or absent.
func get(w, k string, at, done float64, v string, ver int64) Op {
	r := Result{}
	if v != "" {
		r = Result{Exists: true, Value: v, Version: ver}
	}
	return op(w, OpKVGet, at, done, OutcomeOK, key(k), result(r))
}

func TestLinearizableGood(t *testing.T) {
	k := kvKeys[0]
	ev := &Evidence{
		Ops: []Op{
			get("w1", k, 0, 1, "", 0),
			op("w1", OpKVCreate, 2, 3, OutcomeOK, key(k), value("a")),
			op("w2", OpKVCreate, 2.5, 3.5, OutcomeFail, key(k), value("b"), result(Result{Status: StatusExists})),
			get("w2", k, 4, 5, "a", 0),
			op("w1", OpKVSet, 6, 7, OutcomeOK, key(k), value("c"), version(0), result(Result{Version: 1})),
			op("w2", OpKVSet, 6.5, 7.5, OutcomeFail, key(k), value("d"), version(0), result(Result{Status: StatusBadVersion})),
			// Killed mid-write: applied, as the later read shows.
			op("w3", OpKVSet, 8, 0, OutcomeUnknown, key(k), value("e"), version(AnyVersion)),
			get("w1", k, 9, 10, "e", 2),
			// Unknown and never applied: fine too.
			op("w3", OpKVDelete, 11, 0, OutcomeUnknown, key(k), version(7)),
			get("w2", k, 12, 13, "e", 2),
			op("w1", OpKVDelete, 14, 15, OutcomeOK, key(k), version(2)),
			get("w2", kvKeys[1], 1, 2, "", 0),
		},
		Final: []Op{get(finalWorkerName, k, 20, 21, "", 0)},
	}
	wantPass(t, checkLinearizable(ev, CheckOptions{PorcupineTimeout: 10 * time.Second}))
	wantPass(t, checkLostWrites(ev))
}

func TestLinearizableStaleRead(t *testing.T) {
	k := kvKeys[0]
	ev := &Evidence{
		Ops: []Op{
			op("w1", OpKVCreate, 0, 1, OutcomeOK, key(k), value("a")),
			op("w1", OpKVSet, 2, 3, OutcomeOK, key(k), value("b"), version(AnyVersion), result(Result{Version: 1})),
			get("w2", k, 4, 5, "a", 0), // began after the set was acknowledged
			get("w2", kvKeys[1], 1, 2, "", 0),
		},
	}
	vis := filepath.Join(t.TempDir(), "vis.html")
	v := checkLinearizable(ev, CheckOptions{PorcupineTimeout: 10 * time.Second, VisualizePath: vis})
	wantViolations(t, v, ViolationNotLinearizable)
	if !strings.Contains(v.Violations[0].Detail, k) || strings.Contains(v.Violations[0].Detail, kvKeys[1]) {
		t.Fatalf("detail %q: want the failing key named, and only it", v.Violations[0].Detail)
	}
	if b, err := os.ReadFile(vis); err != nil || !strings.Contains(string(b), "<html") {
		t.Fatalf("porcupine visualization not written: %v", err)
	}

	// A set that reports a version the model cannot reach.
	ev.Ops = []Op{
		op("w1", OpKVCreate, 0, 1, OutcomeOK, key(k), value("a")),
		op("w1", OpKVSet, 2, 3, OutcomeOK, key(k), value("b"), version(0), result(Result{Version: 5})),
	}
	wantViolations(t, checkLinearizable(ev, CheckOptions{}), ViolationNotLinearizable)
}

func TestLostWrites(t *testing.T) {
	k := kvKeys[2]
	base := []Op{
		op("w1", OpKVCreate, 0, 1, OutcomeOK, key(k), value("a")),
		op("w1", OpKVSet, 2, 3, OutcomeOK, key(k), value("b"), version(AnyVersion), result(Result{Version: 1})),
		// Concurrent with the next: either may win.
		op("w1", OpKVSet, 4, 6, OutcomeOK, key(k), value("c"), version(AnyVersion), result(Result{Version: 2})),
		op("w2", OpKVSet, 5, 7, OutcomeOK, key(k), value("d"), version(AnyVersion), result(Result{Version: 3})),
		op("w3", OpKVSet, 5, 0, OutcomeUnknown, key(k), value("e"), version(AnyVersion)),
	}
	for _, tc := range []struct {
		final string
		ok    bool
	}{{"c", true}, {"d", true}, {"e", true}, {"b", false}, {"", false}} {
		ev := &Evidence{Ops: base, Final: []Op{get(finalWorkerName, k, 10, 11, tc.final, 3)}}
		v := checkLostWrites(ev)
		if tc.ok {
			wantPass(t, v)
		} else {
			wantViolations(t, v, ViolationLostWrite)
		}
	}
	if v := checkLostWrites(&Evidence{Ops: base}); v.Status != StatusSkipped {
		t.Fatalf("no final reads: %s, want skipped", v.Status)
	}
}

// sessionEvidence is a run with worker w1 (session 1), killed at 10s and
// w2 (session 2), alive throughout; polls every 0.25s from 0 to 30s list
// the sessions present according to alive.
func sessionEvidence(alive func(id uint64, at float64) bool) *Evidence {
	ev := &Evidence{
		Params: Params{SessionTTL: 3 * time.Second, LockDelay: time.Second, PollInterval: 250 * time.Millisecond,
			ElectionTimeout: 500 * time.Millisecond},
		Workers: []WorkerInfo{
			{ID: "w1", Killed: 10 * sec, Exited: 10 * sec},
			{ID: "w2", Pauses: []Interval{{20 * sec, 25 * sec}}},
		},
		Ops: []Op{
			op("w1", OpSessionOpen, 0, 0.1, OutcomeOK, sess(1)),
			op("w2", OpSessionOpen, 0, 0.1, OutcomeOK, sess(2)),
		},
	}
	for at := 0.25; at <= 30; at += 0.25 {
		p := SessionPoll{Time: int64(at * float64(sec))}
		for _, id := range []uint64{1, 2} {
			if alive(id, at) {
				p.IDs = append(p.IDs, id)
			}
		}
		ev.Sessions = append(ev.Sessions, p)
	}
	return ev
}

func TestSessionsGood(t *testing.T) {
	ev := sessionEvidence(func(id uint64, at float64) bool {
		if id == 1 {
			return at < 13 // gone 3s after the kill
		}
		return at < 24.5 // w2's session expired during its 5s pause
	})
	v := checkSessions(ev)
	wantPass(t, v)
	if opened, expired := sessionCounts(ev); opened != 2 || expired != 2 {
		t.Fatalf("sessionCounts = %d, %d; want 2 opened, 2 expired", opened, expired)
	}
}

func TestSessionsKilledSessionLingers(t *testing.T) {
	ev := sessionEvidence(func(id uint64, at float64) bool { return id == 2 || at < 20 })
	wantViolations(t, checkSessions(ev), ViolationSessionNotExpired)
	// Listed until the end of the run, long after the bound.
	ev = sessionEvidence(func(id uint64, at float64) bool { return true })
	wantViolations(t, checkSessions(ev), ViolationSessionNotExpired)
	// A member fault right after the kill widens the bound: 8s is fine.
	ev = sessionEvidence(func(id uint64, at float64) bool { return id == 2 || at < 18 })
	ev.Faults = []FaultRecord{{Time: 10.5 * 1e9, Kind: FaultLeaderKill, Phase: "start"}, {Time: 12 * 1e9, Kind: FaultLeaderKill, Phase: "end"}}
	wantPass(t, checkSessions(ev))
	// Leader changes one after another restart the bound each time...
	ev = sessionEvidence(func(id uint64, at float64) bool { return id == 2 || at < 28 })
	ev.Faults = []FaultRecord{
		{Time: 11 * sec, Kind: FaultLeaderKill, Phase: "start"}, {Time: 13 * sec, Kind: FaultLeaderKill, Phase: "end"},
		{Time: 18 * sec, Kind: FaultIsolateLeader, Phase: "start"}, {Time: 20 * sec, Kind: FaultIsolateLeader, Phase: "end"},
	}
	wantPass(t, checkSessions(ev))
	// ...but a fault that began after the session should have been gone
	// excuses nothing.
	ev.Faults = ev.Faults[:2]
	ev.Faults = append(ev.Faults, FaultRecord{Time: 25 * sec, Kind: FaultSplit, Phase: "start"}, FaultRecord{Time: 27 * sec, Kind: FaultSplit, Phase: "end"})
	wantViolations(t, checkSessions(ev), ViolationSessionNotExpired)
	// Worker faults move no leader.
	ev.Faults = []FaultRecord{{Time: 11 * sec, Kind: FaultWorkerPause, Phase: "start"}, {Time: 25 * sec, Kind: FaultWorkerPause, Phase: "end"}}
	wantViolations(t, checkSessions(ev), ViolationSessionNotExpired)
}

func TestSessionsExpiredEarly(t *testing.T) {
	// w2's session vanishes at 15s while w2 runs unpaused and connected.
	ev := sessionEvidence(func(id uint64, at float64) bool { return (id == 1 && at < 12) || (id == 2 && at < 15) })
	wantViolations(t, checkSessions(ev), ViolationSessionExpired)
	// The same after a jeopardy (w2 was cut off from the cluster) is not
	// a safety violation.
	ev.Ops = append(ev.Ops, op("w2", EvSessionState, 13, 13, OutcomeOK, sess(2), state("jeopardy")))
	wantPass(t, checkSessions(ev))
	// Closed on purpose: fine.
	ev.Ops = append(ev.Ops[:2], op("w2", OpSessionClose, 14.9, 15, OutcomeOK, sess(2)))
	wantPass(t, checkSessions(ev))

	// The worker itself saw its session expire while running.
	ev = sessionEvidence(func(id uint64, at float64) bool { return (id == 1 && at < 12) || id == 2 })
	ev.Ops = append(ev.Ops, op("w2", EvSessionState, 8, 8, OutcomeOK, sess(2), state("expired")))
	wantViolations(t, checkSessions(ev), ViolationSessionExpired)
}

func TestElection(t *testing.T) {
	camp := func(w string, s uint64, term uint64, at, done float64) Op {
		return op(w, OpCampaign, at, done, OutcomeOK, token(term), sess(s))
	}
	good := &Evidence{Ops: []Op{
		camp("w1", 1, 10, 0, 1),
		camp("w2", 2, 15, 0.5, 3), // concurrent with w1's: waited for it
		camp("w1", 1, 22, 4, 5),
		op("w3", OpCampaign, 4, 0, OutcomeUnknown, sess(3)),
	}}
	wantPass(t, checkElection(good))
	two := &Evidence{Ops: []Op{camp("w1", 1, 10, 0, 1), camp("w2", 2, 10, 2, 3)}}
	wantViolations(t, checkElection(two), ViolationTwoLeaders, ViolationTermOrder)
	back := &Evidence{Ops: []Op{camp("w1", 1, 10, 0, 1), camp("w2", 2, 8, 2, 3)}}
	wantViolations(t, checkElection(back), ViolationTermOrder)
}
