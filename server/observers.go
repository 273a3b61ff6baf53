package server

import "github.com/latch-io/latch/namespace"

// ApplyObserver is told about every batch the state machine applied, in log
// order, on the FSM goroutine: it must not block (hand work to its own
// goroutine). Entries skipped because they were applied before a restart are
// not reported. The results must not be modified. It is the FSM's
// raftnode.Observer.
type ApplyObserver interface {
	Applied(results []*namespace.Result)
}

// applyObservers fans every applied batch out to several observers, in
// order, on the FSM goroutine.
type applyObservers []ApplyObserver

func (o applyObservers) Applied(results []*namespace.Result) {
	for _, obs := range o {
		obs.Applied(results)
	}
}

// applyObservers returns what the FSM reports to: the watch hub, the lease
// keeper, the server's other observers (see observe), and the user's
// observer (may be nil).
func (s *Server) applyObservers(user ApplyObserver) ApplyObserver {
	obs := applyObservers{s.front.hub, s.front.keep}
	obs = append(obs, s.front.observers...)
	if user != nil {
		obs = append(obs, user)
	}
	return obs
}

// observe adds o to the observers of applied batches (for server parts
// such as locks that push what Apply produced to clients). Call before
// Start.
func (f *front) observe(o ApplyObserver) {
	f.observers = append(f.observers, o)
	f.s.fsm.SetObserver(f.s.applyObservers(f.s.cfg.Observer))
}
