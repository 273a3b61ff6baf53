package httpapi

// The console's charts over time, as the HTTP API serves them: every
// member samples its own counters once a second (package consolestats)
// into a ring of the last few minutes, and streams the samples as
// Server-Sent Events on GET /api/v1/stats/events. A page gets the ring
// first, so it draws the last minutes at once, then one sample a second.
// ?member=ID asks another member's stream through this one (the console
// runs under a same-origin policy and shows every member, whichever one
// served it).

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/server/consolestats"
	"github.com/latch-io/latch/session"
)

// Stats is a member's ring of samples (a consolestats.Sampler).
type Stats interface {
	// Open counts a stream open until closed is called: while any is,
	// the gauges are read every second.
	Open() (closed func())
	// Since returns the samples after seq, oldest first, and a channel
	// closed at the next sample.
	Since(seq uint64) ([]consolestats.Sample, <-chan struct{})
}

// statsHistoryMessage is the first message of a stats stream.
type statsHistoryMessage struct {
	Member     string                `json:"member"`
	IntervalMS int64                 `json:"interval_ms"`
	Samples    []consolestats.Sample `json:"samples"`
}

// statsEvents answers GET /api/v1/stats/events[?member=ID]: a "history"
// event with the member's ring, then a "sample" event every second. For
// another member it relays that member's stream.
func (a *API) statsEvents(w http.ResponseWriter, r *http.Request, c caller) {
	id := r.URL.Query().Get("member")
	if id != "" && id != a.cfg.ID {
		a.relayStats(w, r, c, id)
		return
	}
	release, err := a.watchSlot(c.identity)
	if err != nil {
		apiError(w, err)
		return
	}
	defer release()
	st := a.stats
	defer st.Open()()
	samples, changed := st.Since(0)
	out, err := startSSE(w)
	if err != nil {
		return
	}
	if samples == nil {
		samples = []consolestats.Sample{}
	}
	if out.event("", "history", statsHistoryMessage{Member: a.cfg.ID, IntervalMS: consolestats.Interval.Milliseconds(), Samples: samples}, true) != nil {
		return
	}
	var last uint64
	if len(samples) > 0 {
		last = samples[len(samples)-1].Seq
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-changed:
		}
		samples, changed = st.Since(last)
		for i, smp := range samples {
			if out.event("", "sample", smp, i == len(samples)-1) != nil {
				return
			}
			last = smp.Seq
		}
	}
}

// relayStats serves member id's stats stream through this member.
func (a *API) relayStats(w http.ResponseWriter, r *http.Request, c caller, id string) {
	if c.forwarded {
		// Its first member asked the wrong one: never relay twice.
		apiError(w, fmt.Errorf("%w: %s is not member %s", namespace.ErrNoMember, a.cfg.ID, id))
		return
	}
	ms, err := a.m.Members()
	if err != nil {
		apiError(w, err)
		return
	}
	i := slices.IndexFunc(ms, func(m adminapi.MemberStatus) bool { return m.ID == id })
	if i < 0 {
		apiError(w, fmt.Errorf("%w: %s", namespace.ErrNoMember, id))
		return
	}
	addr := ms[i].APIAddr
	if addr == "" {
		// It has not recorded its addresses in the log yet.
		apiError(w, fmt.Errorf("%w: member %s's api address is not known yet", session.ErrTimeout, id))
		return
	}
	release, err := a.watchSlot(c.identity)
	if err != nil {
		apiError(w, err)
		return
	}
	defer release()
	done, err := a.forwardTo(r.Context(), w, r, c, addr, nil)
	if !done {
		msg := "it did not answer"
		if err != nil {
			msg = err.Error()
		}
		apiError(w, fmt.Errorf("%w: member %s's stats: %s", session.ErrTimeout, id, msg))
	}
}
