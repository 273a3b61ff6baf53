package chaos

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
)

// checkMutualExclusion judges the fencedstore history (the resource the
// locks protect) and the workers' use of their locks:
//
//   - fencing-order: per key, accepted writes' tokens never decrease in the
//     order the store accepted them;
//   - lost-update: per counter key, every accepted write is exactly one
//     above the previous accepted write (a read-modify-write that
//     overlapped another writes the same value twice);
//   - overlapping-holders: no two clients' read-modify-writes (accepted
//     read .. accepted write with one token) interleave in the store's
//     order while both workers believed they held an exclusive lock
//     covering the key;
//   - use-after-lost: no worker reads or writes with a lock's token after
//     it recorded that lock's Lost().
func checkMutualExclusion(ev *Evidence) Verdict {
	var vs []Violation
	writes, accepted, rejected := 0, 0, 0
	byKey := map[string][]StoreRecord{}
	for _, r := range ev.Store {
		if r.Accepted {
			accepted++
			byKey[r.Key] = append(byKey[r.Key], r)
		} else {
			rejected++
		}
	}
	beliefs := holdBeliefs(ev.Ops)
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		recs := byKey[k]
		slices.SortFunc(recs, func(a, b StoreRecord) int { return cmp.Compare(a.Seq, b.Seq) })
		counter := slices.Contains(counterKeys, k)
		var last *StoreRecord
		for i := range recs {
			r := &recs[i]
			if r.Op != "write" {
				continue
			}
			writes++
			if last != nil && r.Token < last.Token {
				vs = append(vs, Violation{ViolationFencingOrder, fmt.Sprintf(
					"key %q: write #%d by %s with token %d accepted after write #%d by %s with token %d",
					k, r.Seq, r.Client, r.Token, last.Seq, last.Client, last.Token)})
			}
			if counter {
				prev := 0
				if last != nil {
					prev, _ = strconv.Atoi(last.Data)
				}
				if got, err := strconv.Atoi(r.Data); err != nil || got != prev+1 {
					vs = append(vs, Violation{ViolationLostUpdate, fmt.Sprintf(
						"key %q: write #%d by %s (token %d) stored %q after %d: an update was lost",
						k, r.Seq, r.Client, r.Token, r.Data, prev)})
				}
			}
			last = r
		}
		if counter {
			vs = append(vs, overlappingSections(k, recs, beliefs)...)
		}
	}
	vs = append(vs, useAfterLost(ev.Ops)...)
	summary := fmt.Sprintf("%d store attempts accepted (%d writes), %d fenced off, on %d keys", accepted, writes, rejected, len(keys))
	return verdict(CheckMutualExclusion, summary, vs)
}

// holdKey names one grant a worker believed it held.
type holdKey struct {
	worker string
	token  uint64
}

// holdBeliefs maps each worker's successful acquires to the lock paths
// held in exclusive mode under that token.
func holdBeliefs(ops []Op) map[holdKey][]string {
	out := map[holdKey][]string{}
	for i := range ops {
		o := &ops[i]
		if o.Op == OpAcquire && o.Outcome == OutcomeOK && o.Args.Mode == ModeExclusive {
			k := holdKey{o.Worker, o.Token}
			out[k] = append(out[k], o.Args.Key)
		}
	}
	return out
}

func believedExclusive(beliefs map[holdKey][]string, client string, token uint64, key string) bool {
	for _, p := range beliefs[holdKey{client, token}] {
		if covers(p, key) {
			return true
		}
	}
	return false
}

// section is one read-modify-write as the store saw it.
type section struct {
	client      string
	token       uint64
	read, write uint64 // store sequence numbers
}

// overlappingSections finds read-modify-writes on key whose spans in the
// store's order interleave.
func overlappingSections(key string, recs []StoreRecord, beliefs map[holdKey][]string) []Violation {
	lastRead := map[holdKey]uint64{}
	var secs []section
	for _, r := range recs {
		k := holdKey{r.Client, r.Token}
		switch r.Op {
		case "read":
			lastRead[k] = r.Seq
		case "write":
			start, ok := lastRead[k]
			if !ok {
				start = r.Seq // a blind write: a span of one
			}
			secs = append(secs, section{client: r.Client, token: r.Token, read: start, write: r.Seq})
			delete(lastRead, k)
		}
	}
	var vs []Violation
	// Sections are in write order; an earlier section overlaps a later
	// one when it wrote after the later one read.
	for j := range secs {
		for i := j - 1; i >= 0; i-- {
			a, b := secs[i], secs[j]
			if a.write < b.read {
				break // earlier sections wrote earlier still
			}
			if a.client == b.client {
				continue
			}
			if !believedExclusive(beliefs, a.client, a.token, key) || !believedExclusive(beliefs, b.client, b.token, key) {
				continue
			}
			vs = append(vs, Violation{ViolationOverlappingHolders, fmt.Sprintf(
				"key %q: %s (token %d) read #%d..wrote #%d while %s (token %d) read #%d..wrote #%d; both believed they held the lock",
				key, a.client, a.token, a.read, a.write, b.client, b.token, b.read, b.write)})
		}
	}
	return vs
}

// useAfterLost finds store operations a worker invoked with a token after
// it recorded that the lock of that token was lost. Both records come from
// one worker's file, in program order, so the order is certain.
func useAfterLost(ops []Op) []Violation {
	type wk = holdKey
	lost := map[wk]uint64{} // -> id of the lost event
	byWorker := map[string][]*Op{}
	for i := range ops {
		byWorker[ops[i].Worker] = append(byWorker[ops[i].Worker], &ops[i])
	}
	var vs []Violation
	workers := make([]string, 0, len(byWorker))
	for w := range byWorker {
		workers = append(workers, w)
	}
	slices.Sort(workers)
	for _, w := range workers {
		list := byWorker[w]
		slices.SortFunc(list, func(a, b *Op) int { return cmp.Compare(a.ID, b.ID) })
		for _, o := range list {
			switch o.Op {
			case EvLockLost:
				if _, seen := lost[wk{w, o.Token}]; !seen {
					lost[wk{w, o.Token}] = o.ID
				}
			case OpStoreRead, OpStoreWrite:
				if ev, ok := lost[wk{w, o.Token}]; ok {
					vs = append(vs, Violation{ViolationUseAfterLost, fmt.Sprintf(
						"%s after its lock with token %d was lost (event #%d); outcome %s", describeOp(o), o.Token, ev, o.Outcome)})
				}
			}
		}
	}
	return vs
}
