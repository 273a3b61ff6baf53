package chaos

import (
	"cmp"
	"fmt"
	"slices"
)

// checkElection checks the campaigns the election workers won:
//
//   - two-leaders-in-term: each term (the fencing token of the election's
//     lock) was won by one campaigner only;
//   - term-not-increasing: a campaign that began after another one was
//     won ended with a higher term.
//
// The leaders' writes of their term to fencedstore are judged by the
// mutual-exclusion checker (fencing-order on the election key).
func checkElection(ev *Evidence) Verdict {
	var won []*Op
	for i := range ev.Ops {
		o := &ev.Ops[i]
		if o.Op == OpCampaign && o.Outcome == OutcomeOK {
			won = append(won, o)
		}
	}
	if len(won) == 0 {
		return skipped(CheckElection, "no election won")
	}
	var vs []Violation
	byTerm := map[uint64]*Op{}
	for _, o := range won {
		if prev, ok := byTerm[o.Token]; ok && (prev.Worker != o.Worker || prev.Session != o.Session) {
			vs = append(vs, Violation{ViolationTwoLeaders, fmt.Sprintf(
				"term %d won by %s (session %d) and by %s (session %d)", o.Token, prev.Worker, prev.Session, o.Worker, o.Session)})
			continue
		}
		byTerm[o.Token] = o
	}
	slices.SortFunc(won, func(a, b *Op) int { return cmp.Compare(a.Complete, b.Complete) })
	var maxTerm uint64
	for j, b := range won {
		maxTerm = max(maxTerm, b.Token)
		for _, a := range won[:j] {
			if a.Complete < b.Invoke && a.Token >= b.Token {
				vs = append(vs, Violation{ViolationTermOrder, fmt.Sprintf(
					"%s won term %d after %s had won term %d", describeOp(b), b.Token, describeOp(a), a.Token)})
			}
		}
	}
	return verdict(CheckElection, fmt.Sprintf("%d elections won, %d terms, highest %d", len(won), len(byTerm), maxTerm), vs)
}
