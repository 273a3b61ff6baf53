package chaos

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// The kv workload treats each key as a register with a version: create,
// set (optionally only at a version), get, delete (same), and two
// conditional transactions on the key (compare-and-set on its value;
// create if absent, else read). Its history is checked per key with
// porcupine against kvModel.

// Definite failure statuses of kv writes (Result.Status).
const (
	StatusNoNode     = "nonode"
	StatusExists     = "exists"
	StatusBadVersion = "badversion"
)

// kvState is a key's state in the model.
type kvState struct {
	Exists  bool
	Value   string
	Version int64
}

// kvInput and kvOutput are porcupine's view of an operation.
type kvInput struct {
	Op      string
	Value   string
	Version int64  // expected version of set/delete; AnyVersion for none
	Expect  string // txn-cas: the value compared
}

type kvOutput struct {
	Unknown   bool   // the outcome is unknown: applied or not
	Status    string // "" for success, else a Status* constant
	Exists    bool   // get
	Value     string // get; txn-create's else branch
	Version   int64  // get: the version read; set: the new version; txn: as the branch's op
	Succeeded bool   // txn: the then branch ran
}

// kvStep applies in to s. ok reports whether the model may produce out;
// an unknown outcome is always possible, applied when the precondition
// holds (porcupine may order it after everything else, where applying it
// changes nothing anyone observed).
func kvStep(s kvState, in kvInput, out kvOutput) (bool, kvState) {
	versionOK := in.Version == AnyVersion || in.Version == s.Version
	var next kvState
	var status string
	switch in.Op {
	case OpKVGet:
		if out.Unknown || out.Status != "" || out.Exists != s.Exists {
			return false, s
		}
		return !s.Exists || (out.Value == s.Value && out.Version == s.Version), s
	case OpKVTxnCAS, OpKVTxnCreate:
		return kvTxnStep(s, in, out)
	case OpKVCreate:
		if s.Exists {
			status, next = StatusExists, s
		} else {
			next = kvState{Exists: true, Value: in.Value}
		}
	case OpKVSet:
		switch {
		case !s.Exists:
			status, next = StatusNoNode, s
		case !versionOK:
			status, next = StatusBadVersion, s
		default:
			next = kvState{Exists: true, Value: in.Value, Version: s.Version + 1}
		}
	case OpKVDelete:
		switch {
		case !s.Exists:
			status, next = StatusNoNode, s
		case !versionOK:
			status, next = StatusBadVersion, s
		default:
			next = kvState{}
		}
	default:
		return false, s
	}
	if out.Unknown {
		return true, next
	}
	if out.Status != status {
		return false, s
	}
	if in.Op == OpKVSet && status == "" && out.Version != next.Version {
		return false, s
	}
	return true, next
}

// kvTxnStep is kvStep for the txns: the state decides the branch, and a
// known outcome must report that branch and what its op returned.
func kvTxnStep(s kvState, in kvInput, out kvOutput) (bool, kvState) {
	var then bool
	next := s
	if in.Op == OpKVTxnCAS {
		if then = s.Exists && s.Value == in.Expect; then {
			next = kvState{Exists: true, Value: in.Value, Version: s.Version + 1}
		}
	} else if then = !s.Exists; then {
		next = kvState{Exists: true, Value: in.Value}
	}
	if out.Unknown {
		return true, next
	}
	if out.Status != "" || out.Succeeded != then {
		return false, s
	}
	switch {
	case in.Op == OpKVTxnCAS && then:
		return out.Version == next.Version, next
	case in.Op == OpKVTxnCreate && !then:
		return out.Value == s.Value && out.Version == s.Version, next
	}
	return true, next
}

func kvDescribeOp(input, output any) string {
	in, out := input.(kvInput), output.(kvOutput)
	var res string
	switch {
	case out.Unknown:
		res = "?"
	case out.Status != "":
		res = out.Status
	case in.Op == OpKVGet && !out.Exists:
		res = "absent"
	case in.Op == OpKVGet:
		res = fmt.Sprintf("%q v%d", out.Value, out.Version)
	case in.Op == OpKVSet:
		res = fmt.Sprintf("ok v%d", out.Version)
	case in.Op == OpKVTxnCAS && out.Succeeded:
		res = fmt.Sprintf("then: set v%d", out.Version)
	case in.Op == OpKVTxnCreate && !out.Succeeded:
		res = fmt.Sprintf("else: get %q v%d", out.Value, out.Version)
	case in.Op == OpKVTxnCAS || in.Op == OpKVTxnCreate:
		res = map[bool]string{true: "then", false: "else"}[out.Succeeded]
	default:
		res = "ok"
	}
	switch in.Op {
	case OpKVGet:
		return "get -> " + res
	case OpKVCreate:
		return fmt.Sprintf("create(%q) -> %s", in.Value, res)
	case OpKVSet:
		return fmt.Sprintf("set(%q, v%d) -> %s", in.Value, in.Version, res)
	case OpKVTxnCAS:
		return fmt.Sprintf("txn(if value = %q then set %q) -> %s", in.Expect, in.Value, res)
	case OpKVTxnCreate:
		return fmt.Sprintf("txn(if absent then create %q else get) -> %s", in.Value, res)
	default:
		return fmt.Sprintf("delete(v%d) -> %s", in.Version, res)
	}
}

func kvDescribeState(state any) string {
	s := state.(kvState)
	if !s.Exists {
		return "absent"
	}
	return fmt.Sprintf("%q v%d", s.Value, s.Version)
}

// kvModel is a single key's register; partitions split a history by key
// (Operation.Metadata holds the key).
var kvModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Metadata.(string)
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return kvState{} },
	Step: func(state, input, output any) (bool, any) {
		return kvStep(state.(kvState), input.(kvInput), output.(kvOutput))
	},
	DescribeOperation:         kvDescribeOp,
	DescribeState:             kvDescribeState,
	DescribeOperationMetadata: func(info any) string { return info.(string) },
}

func isKVOp(op string) bool {
	switch op {
	case OpKVGet, OpKVCreate, OpKVSet, OpKVDelete, OpKVTxnCAS, OpKVTxnCreate:
		return true
	}
	return false
}

// isKVTxn reports whether op is one of the kv txns.
func isKVTxn(op string) bool { return op == OpKVTxnCAS || op == OpKVTxnCreate }

// kvOperations turns the kv operations of ops into porcupine operations.
// Failed reads are dropped (they changed nothing); writes of unknown
// outcome return at +infinity, as etcd's robustness tests do.
func kvOperations(ops []Op) ([]porcupine.Operation, map[string]int) {
	clients := map[string]int{}
	var out []porcupine.Operation
	for i := range ops {
		o := &ops[i]
		if !isKVOp(o.Op) {
			continue
		}
		if o.Op == OpKVGet && o.Outcome != OutcomeOK {
			continue
		}
		id, ok := clients[o.Worker]
		if !ok {
			id = len(clients)
			clients[o.Worker] = id
		}
		in := kvInput{Op: o.Op, Value: o.Args.Value, Version: o.Args.Version, Expect: o.Args.Expect}
		if o.Op == OpKVGet || o.Op == OpKVCreate || isKVTxn(o.Op) {
			in.Version = AnyVersion
		}
		var outp kvOutput
		ret := o.Complete
		switch o.Outcome {
		case OutcomeOK:
			outp = kvOutput{Exists: o.Result.Exists, Value: o.Result.Value, Version: o.Result.Version, Succeeded: o.Result.Succeeded}
		case OutcomeFail:
			outp = kvOutput{Status: o.Result.Status}
			if outp.Status == "" {
				outp.Unknown = true // a failure without a definite status
				ret = math.MaxInt64
			}
		default:
			outp.Unknown, ret = true, math.MaxInt64
		}
		if ret == 0 {
			ret = math.MaxInt64
		}
		out = append(out, porcupine.Operation{ClientId: id, Input: in, Call: o.Invoke, Output: outp, Return: ret, Metadata: o.Args.Key})
	}
	return out, clients
}

// checkLinearizable checks the kv history, the final reads included,
// with porcupine.
func checkLinearizable(ev *Evidence, opts CheckOptions) Verdict {
	all := append(slices.Clone(ev.Ops), ev.Final...)
	history, _ := kvOperations(all)
	if len(history) == 0 {
		return skipped(CheckLinearizable, "no kv operations recorded")
	}
	unknown := 0
	for _, op := range history {
		if op.Output.(kvOutput).Unknown {
			unknown++
		}
	}
	res, info := porcupine.CheckOperationsVerbose(kvModel, history, opts.PorcupineTimeout)
	summary := fmt.Sprintf("%d kv operations (%d of unknown outcome) on %d keys", len(history), unknown, len(kvKeysOf(history)))
	switch res {
	case porcupine.Ok:
		return verdict(CheckLinearizable, summary+": linearizable", nil)
	case porcupine.Unknown:
		return Verdict{Checker: CheckLinearizable, Status: StatusUnknown, Summary: summary + fmt.Sprintf(": porcupine gave up after %v", opts.PorcupineTimeout)}
	}
	detail := "no linearization exists"
	if opts.VisualizePath != "" {
		if err := porcupine.VisualizePath(kvModel, info, opts.VisualizePath); err != nil {
			detail += fmt.Sprintf(" (visualization failed: %v)", err)
		} else {
			detail += "; see " + opts.VisualizePath
		}
	}
	var bad []string
	for k := range kvKeysOf(history) {
		var part []porcupine.Operation
		for _, op := range history {
			if op.Metadata.(string) == k {
				part = append(part, op)
			}
		}
		if porcupine.CheckOperationsTimeout(kvModel, part, opts.PorcupineTimeout) == porcupine.Illegal {
			bad = append(bad, k)
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		detail = fmt.Sprintf("keys %v: %s", bad, detail)
	}
	return verdict(CheckLinearizable, summary, []Violation{{ViolationNotLinearizable, detail}})
}

// VisualizeKV writes porcupine's HTML visualization of ev's kv history
// (final reads included) to path, whatever the verdict: a failed run
// keeps it even when another checker failed.
func VisualizeKV(ev *Evidence, path string, timeout time.Duration) error {
	history, _ := kvOperations(append(slices.Clone(ev.Ops), ev.Final...))
	if len(history) == 0 {
		return nil
	}
	_, info := porcupine.CheckOperationsVerbose(kvModel, history, timeout)
	return porcupine.VisualizePath(kvModel, info, path)
}

func kvKeysOf(history []porcupine.Operation) map[string]bool {
	keys := map[string]bool{}
	for _, op := range history {
		keys[op.Metadata.(string)] = true
	}
	return keys
}

// checkLostWrites checks that the final read of each key shows the effect
// of one of the key's last acknowledged writes (those no other
// acknowledged write began after), or of a write whose outcome is unknown:
// an acknowledged write is never lost.
func checkLostWrites(ev *Evidence) Verdict {
	finals := map[string]*Op{}
	for i := range ev.Final {
		o := &ev.Final[i]
		if o.Op == OpKVGet && o.Outcome == OutcomeOK {
			finals[o.Args.Key] = o
		}
	}
	if len(finals) == 0 {
		return skipped(CheckLostWrites, "no final reads")
	}
	byKey := map[string][]*Op{}
	for i := range ev.Ops {
		o := &ev.Ops[i]
		if isKVOp(o.Op) && o.Op != OpKVGet {
			if isKVTxn(o.Op) && o.Outcome == OutcomeOK && !o.Result.Succeeded {
				continue // the else branch ran: no write
			}
			byKey[o.Args.Key] = append(byKey[o.Args.Key], o)
		}
	}
	var vs []Violation
	keys := make([]string, 0, len(finals))
	for k := range finals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	acked := 0
	for _, k := range keys {
		f := finals[k]
		writes := byKey[k]
		var last []*Op
		possible := map[string]bool{} // "" = absent
		anyAcked := false
		for _, w := range writes {
			switch w.Outcome {
			case OutcomeOK:
				anyAcked = true
				acked++
				superseded := false
				for _, w2 := range writes {
					if w2 != w && w2.Outcome == OutcomeOK && w2.Invoke > w.Complete {
						superseded = true
						break
					}
				}
				if !superseded {
					last = append(last, w)
					possible[effect(w)] = true
				}
			case OutcomeUnknown:
				possible[effect(w)] = true
			}
		}
		if !anyAcked {
			possible[""] = true
		}
		got := ""
		if f.Result.Exists {
			got = "=" + f.Result.Value
		}
		if !possible[got] {
			var names []string
			for _, w := range last {
				names = append(names, describeOp(w)+" "+effect(w))
			}
			show := "absent"
			if got != "" {
				show = fmt.Sprintf("%q", f.Result.Value)
			}
			vs = append(vs, Violation{ViolationLostWrite, fmt.Sprintf(
				"key %s: final read %s, but the last acknowledged writes were %v", k, show, names)})
		}
	}
	return verdict(CheckLostWrites, fmt.Sprintf("%d keys read at the end, %d acknowledged writes", len(keys), acked), vs)
}

// effect is the state a write leaves: "=value", or "" for absent.
func effect(w *Op) string {
	if w.Op == OpKVDelete {
		return ""
	}
	return "=" + w.Args.Value
}
