package bench

import (
	"context"
)

// terms reads the raft term of every member over its admin endpoint
// (/v1/status, which wants an admin certificate), for counting elections
// across a measured window: every election raises the term, whether or
// not it changed the leader. It holds the scrapers of the members known
// at the start.
type terms struct {
	scs []*scraper
}

// memberTerms returns the terms reader of the run's cluster, or nil when
// the member list cannot be read.
func (r *runner) memberTerms() *terms {
	admins, err := r.adminScrapers(r.cfg.OpTimeout)
	if err != nil {
		r.logf("terms not read: %v", err)
		return nil
	}
	t := &terms{}
	for _, a := range admins {
		t.scs = append(t.scs, a.sc)
	}
	return t
}

// highest is the highest term any member reports; ok is false when none
// answered.
func (t *terms) highest(ctx context.Context) (term uint64, ok bool) {
	if t == nil {
		return 0, false
	}
	for _, sc := range t.scs {
		if st, err := sc.status(ctx); err == nil {
			term, ok = max(term, st.Term), true
		}
	}
	return term, ok
}
