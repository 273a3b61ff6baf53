package chaos

import (
	"testing"
	"time"
)

func expect(v string) func(*Op) { return func(o *Op) { o.Args.Expect = v } }

// TestLinearizableTxns: the kv model follows the txns' branches, so a
// history of compare-and-sets and create-or-reads that a correct cluster
// could produce passes, and each planted wrong answer (a branch the state
// could not pick, a read the else branch could not see, a set version
// that does not follow) fails.
func TestLinearizableTxns(t *testing.T) {
	k := kvKeys[0]
	good := []Op{
		// Two racing create-or-reads: one creates, the other reads it.
		op("w1", OpKVTxnCreate, 0, 2, OutcomeOK, key(k), value("a"), result(Result{Succeeded: true})),
		op("w2", OpKVTxnCreate, 1, 3, OutcomeOK, key(k), value("b"), result(Result{Value: "a"})),
		// A CAS on the value read, then a stale one that takes the else.
		op("w2", OpKVTxnCAS, 4, 5, OutcomeOK, key(k), value("c"), expect("a"), result(Result{Succeeded: true, Version: 1})),
		op("w1", OpKVTxnCAS, 6, 7, OutcomeOK, key(k), value("d"), expect("a"), result(Result{})),
		// Unknown outcome, applied, as the read shows.
		op("w3", OpKVTxnCAS, 8, 0, OutcomeUnknown, key(k), value("e"), expect("c")),
		get("w1", k, 9, 10, "e", 2),
		op("w1", OpKVDelete, 11, 12, OutcomeOK, key(k), version(AnyVersion)),
		op("w2", OpKVTxnCAS, 13, 14, OutcomeOK, key(k), value("f"), expect("e"), result(Result{})), // absent: else
	}
	ev := &Evidence{Ops: good, Final: []Op{get(finalWorkerName, k, 20, 21, "", 0)}}
	wantPass(t, checkLinearizable(ev, CheckOptions{PorcupineTimeout: 10 * time.Second}))
	wantPass(t, checkLostWrites(ev))

	for name, bad := range map[string][]Op{
		"both creates took the then branch": {
			op("w1", OpKVTxnCreate, 0, 1, OutcomeOK, key(k), value("a"), result(Result{Succeeded: true})),
			op("w2", OpKVTxnCreate, 2, 3, OutcomeOK, key(k), value("b"), result(Result{Succeeded: true})),
		},
		"the else branch read a value never written": {
			op("w1", OpKVTxnCreate, 0, 1, OutcomeOK, key(k), value("a"), result(Result{Succeeded: true})),
			op("w2", OpKVTxnCreate, 2, 3, OutcomeOK, key(k), value("b"), result(Result{Value: "b"})),
		},
		"a cas on a stale value succeeded": {
			op("w1", OpKVCreate, 0, 1, OutcomeOK, key(k), value("a")),
			op("w1", OpKVSet, 2, 3, OutcomeOK, key(k), value("b"), version(AnyVersion), result(Result{Version: 1})),
			op("w2", OpKVTxnCAS, 4, 5, OutcomeOK, key(k), value("c"), expect("a"), result(Result{Succeeded: true, Version: 2})),
		},
		"a cas on the current value took the else branch": {
			op("w1", OpKVCreate, 0, 1, OutcomeOK, key(k), value("a")),
			op("w2", OpKVTxnCAS, 2, 3, OutcomeOK, key(k), value("c"), expect("a"), result(Result{})),
		},
		"a cas reports a version the set cannot have": {
			op("w1", OpKVCreate, 0, 1, OutcomeOK, key(k), value("a")),
			op("w2", OpKVTxnCAS, 2, 3, OutcomeOK, key(k), value("c"), expect("a"), result(Result{Succeeded: true, Version: 4})),
		},
		"a read misses an acknowledged cas": {
			op("w1", OpKVCreate, 0, 1, OutcomeOK, key(k), value("a")),
			op("w2", OpKVTxnCAS, 2, 3, OutcomeOK, key(k), value("c"), expect("a"), result(Result{Succeeded: true, Version: 1})),
			get("w1", k, 4, 5, "a", 0),
		},
	} {
		t.Run(name, func(t *testing.T) {
			wantViolations(t, checkLinearizable(&Evidence{Ops: bad}, CheckOptions{PorcupineTimeout: 10 * time.Second}), ViolationNotLinearizable)
		})
	}
}

// TestLostWritesTxns: an acknowledged cas is a write the final read must
// show; a cas that took the else branch wrote nothing.
func TestLostWritesTxns(t *testing.T) {
	k := kvKeys[1]
	ops := []Op{
		op("w1", OpKVCreate, 0, 1, OutcomeOK, key(k), value("a")),
		op("w2", OpKVTxnCAS, 2, 3, OutcomeOK, key(k), value("c"), expect("a"), result(Result{Succeeded: true, Version: 1})),
		op("w1", OpKVTxnCAS, 4, 5, OutcomeOK, key(k), value("d"), expect("a"), result(Result{})),
	}
	wantPass(t, checkLostWrites(&Evidence{Ops: ops, Final: []Op{get(finalWorkerName, k, 9, 10, "c", 1)}}))
	wantViolations(t, checkLostWrites(&Evidence{Ops: ops, Final: []Op{get(finalWorkerName, k, 9, 10, "a", 0)}}), ViolationLostWrite)
	wantViolations(t, checkLostWrites(&Evidence{Ops: ops, Final: []Op{get(finalWorkerName, k, 9, 10, "d", 2)}}), ViolationLostWrite)
}
