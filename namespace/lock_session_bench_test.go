package namespace

import (
	"fmt"
	"testing"
)

// One session with 40,000 lock requests made (here 10,000, for time) each new one slower (1.2 s ->
// 35 s per 2,000 end to end) and its close stalled every client for 6.2 s.
//
//	go test ./namespace -run '^$' -bench 'ManyRequests' -benchtime 2000x
func BenchmarkLockRequestManyRequests(b *testing.B) {
	for _, n := range []int{0, 10000} {
		b.Run(fmt.Sprintf("session-has-%d", n), func(b *testing.B) {
			limits := DefaultLimits()
			limits.MaxLockRequestsPerSession = 0
			h := newLockHarness(b, limits)
			s := h.session()
			for i := range n {
				h.lock(s, fmt.Sprintf("/pre/%d", i), LockExclusive, nil)
			}
			b.ResetTimer()
			for i := range b.N {
				h.lock(s, fmt.Sprintf("/new/%d", i), LockExclusive, nil)
			}
		})
	}
}

// go test ./namespace -run '^$' -bench 'SessionCloseManyRequests' -benchtime 1x
func BenchmarkSessionCloseManyRequests(b *testing.B) {
	for range b.N {
		b.StopTimer()
		limits := DefaultLimits()
		limits.MaxLockRequestsPerSession = 0
		h := newLockHarness(b, limits)
		s := h.session()
		for i := range 10000 {
			h.lock(s, fmt.Sprintf("/pre/%d", i), LockExclusive, nil)
		}
		b.StartTimer()
		h.apply(&Command{Op: OpSessionClose, Session: s})
	}
}
