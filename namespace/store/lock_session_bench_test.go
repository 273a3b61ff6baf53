package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
)

// One session with 40,000 lock requests made (here 10,000, for time) each new one slower (1.2 s ->
// 35 s per 2,000 end to end) and its close stalled every client for 6.2 s.
//
//	go test ./namespace/store -run '^$' -bench 'ManyRequests' -benchtime 2000x
func BenchmarkLockRequestManyRequests(b *testing.B) {
	for _, n := range []int{0, 10000} {
		b.Run(fmt.Sprintf("session-has-%d", n), func(b *testing.B) {
			limits := namespace.DefaultLimits()
			limits.MaxLockRequestsPerSession = 0
			h := newLockHarness(b, limits)
			s := h.session()
			for i := range n {
				h.lock(s, fmt.Sprintf("/pre/%d", i), namespace.LockExclusive, nil)
			}
			b.ResetTimer()
			for i := range b.N {
				h.lock(s, fmt.Sprintf("/new/%d", i), namespace.LockExclusive, nil)
			}
		})
	}
}

// BenchmarkSessionCloseManyRequests closes a session holding 10,000 lock
// requests and applies the ticks NextTimer asks for until its nodes are all
// gone. ns/op is the whole work; max-apply-ms is the longest single command,
// which every other client waits behind.
//
//	go test ./namespace/store -run '^$' -bench 'SessionCloseManyRequests' -benchtime 5x
func BenchmarkSessionCloseManyRequests(b *testing.B) {
	var longest time.Duration
	commands := 0
	for range b.N {
		b.StopTimer()
		limits := namespace.DefaultLimits()
		limits.MaxLockRequestsPerSession = 0
		h := newLockHarness(b, limits)
		s := h.session()
		for i := range 10000 {
			h.lock(s, fmt.Sprintf("/pre/%d", i), namespace.LockExclusive, nil)
		}
		b.StartTimer()
		cmd := &namespace.Command{Op: namespace.OpSessionClose, Session: s}
		for {
			start := time.Now()
			h.apply(cmd)
			longest = max(longest, time.Since(start))
			commands++
			if next, ok := h.s.NextTimer(); !ok || next > h.now {
				break
			}
			cmd = &namespace.Command{Op: namespace.OpNoop}
		}
		b.StopTimer()
		if left, _ := h.s.SessionEphemerals(s); len(left) != 0 {
			b.Fatalf("%d requests left", len(left))
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(longest.Microseconds())/1000, "max-apply-ms")
	b.ReportMetric(float64(commands)/float64(b.N), "commands/op")
}
