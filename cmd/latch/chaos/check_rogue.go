package chaos

import (
	"fmt"
	"strings"
)

// CheckAuthorization judges the rogue worker: none of its attacks may
// succeed.
const CheckAuthorization = "authorization"

// ViolationUnauthorized: the rogue worker deleted, overwrote or stole a
// node it has no right to, locked /, or planted a reserved name.
const ViolationUnauthorized = "unauthorized-change"

// checkRogue fails for every rogue operation that succeeded. Attempts of
// unknown outcome (the connection broke) are counted, not judged: an
// effect they had would show in the other checkers (a deleted holder's
// node breaks mutual exclusion only if the lock is granted again early).
func checkRogue(ev *Evidence) Verdict {
	var vs []Violation
	attempts, unknown := 0, 0
	for i := range ev.Ops {
		o := &ev.Ops[i]
		if !strings.HasPrefix(o.Op, "rogue-") || o.IsEvent() {
			continue
		}
		attempts++
		switch o.Outcome {
		case OutcomeOK:
			vs = append(vs, Violation{Kind: ViolationUnauthorized,
				Detail: fmt.Sprintf("%s succeeded: the rogue worker has no right to it", describeOp(o))})
		case OutcomeUnknown, "":
			unknown++
		}
	}
	if attempts == 0 {
		return skipped(CheckAuthorization, "the rogue worker made no attempt")
	}
	return verdict(CheckAuthorization,
		fmt.Sprintf("%d rogue attacks, %d refused, %d of unknown outcome", attempts, attempts-unknown-len(vs), unknown), vs)
}
