package session

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func TestLeaseTableExpiryOrderAndBatches(t *testing.T) {
	clk := NewManualClock(epoch)
	lt := NewLeaseTable(clk)
	lt.Add(1, 30*time.Second)
	lt.Add(2, 10*time.Second)
	lt.Add(3, 20*time.Second)
	lt.Add(4, 10*time.Second) // same deadline as 2: ties go by id

	if d, ok := lt.NextDeadline(); !ok || !d.Equal(epoch.Add(10*time.Second)) {
		t.Fatalf("NextDeadline = %v, %v", d, ok)
	}
	clk.Advance(10*time.Second - time.Nanosecond)
	if got := lt.Expired(0); len(got) != 0 {
		t.Fatalf("expired before any deadline: %v", got)
	}
	clk.Advance(time.Hour)
	if got := lt.Expired(2); !slices.Equal(got, []uint64{2, 4}) {
		t.Fatalf("first batch = %v, want [2 4]", got)
	}
	if got := lt.Expired(2); !slices.Equal(got, []uint64{3, 1}) {
		t.Fatalf("second batch = %v, want [3 1]", got)
	}
	if got := lt.Expired(2); len(got) != 0 {
		t.Fatalf("an expiring lease was returned twice: %v", got)
	}
	if _, ok := lt.NextDeadline(); ok {
		t.Fatal("NextDeadline with only expiring leases")
	}
	if lt.Len() != 4 {
		t.Fatalf("Len = %d: expiring leases stay until removed", lt.Len())
	}
	for id := uint64(1); id <= 4; id++ {
		if _, ok := lt.Renew(id); ok {
			t.Errorf("Renew(%d) succeeded after its expiry began", id)
		}
		if _, expiring, ok := lt.Deadline(id); !ok || !expiring {
			t.Errorf("Deadline(%d): expiring %v ok %v", id, expiring, ok)
		}
		lt.Remove(id)
	}
	if lt.Len() != 0 {
		t.Fatalf("Len after removing all = %d", lt.Len())
	}
}

func TestLeaseTableRenewAndRemove(t *testing.T) {
	clk := NewManualClock(epoch)
	lt := NewLeaseTable(clk)
	lt.Add(7, 10*time.Second)
	clk.Advance(9 * time.Second)
	if ttl, ok := lt.Renew(7); !ok || ttl != 10*time.Second {
		t.Fatalf("Renew = %v, %v", ttl, ok)
	}
	clk.Advance(9 * time.Second) // 18s: past the first deadline, not the renewed one
	if got := lt.Expired(0); len(got) != 0 {
		t.Fatalf("renewed lease expired early: %v", got)
	}
	// Past its deadline but not yet picked by the reaper: a renew still
	// counts, nothing has been decided.
	clk.Advance(5 * time.Second)
	if _, ok := lt.Renew(7); !ok {
		t.Fatal("Renew of a late but not expiring lease failed")
	}
	if _, ok := lt.Renew(8); ok {
		t.Fatal("Renew of an unknown session succeeded")
	}
	lt.Remove(7)
	lt.Remove(7) // twice is fine
	if _, ok := lt.Renew(7); ok {
		t.Fatal("Renew after Remove succeeded")
	}
	clk.Advance(time.Hour)
	if got := lt.Expired(0); len(got) != 0 {
		t.Fatalf("removed lease expired: %v", got)
	}
	// Add on a known session restarts it with the new TTL.
	lt.Add(9, time.Second)
	lt.Add(9, time.Minute)
	clk.Advance(30 * time.Second)
	if got := lt.Expired(0); len(got) != 0 {
		t.Fatalf("re-added lease kept its old TTL: %v", got)
	}
}

func TestLeaseTableRequeue(t *testing.T) {
	clk := NewManualClock(epoch)
	lt := NewLeaseTable(clk)
	lt.Add(1, time.Second)
	lt.Add(2, 2*time.Second)
	clk.Advance(3 * time.Second)
	got := lt.Expired(0)
	if !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("Expired = %v", got)
	}
	// The expiry command could not be committed: hand them back.
	drain(lt.Wake())
	lt.Requeue(append(got, 99))
	select {
	case <-lt.Wake():
	default:
		t.Fatal("Requeue did not wake the reaper")
	}
	if _, ok := lt.Renew(1); !ok {
		t.Fatal("a requeued lease is not renewable")
	}
	if got := lt.Expired(0); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("after requeue and renew of 1: %v, want [2]", got)
	}
}

func TestLeaseTableResetAllGivesFullTTL(t *testing.T) {
	clk := NewManualClock(epoch)
	lt := NewLeaseTable(clk)
	lt.Add(1, 5*time.Second)
	lt.Add(2, 5*time.Second)
	clk.Advance(4 * time.Second)
	// A new leader: sessions 2 and 3 exist (1 was closed meanwhile).
	lt.ResetAll(map[uint64]time.Duration{2: 10 * time.Second, 3: 20 * time.Second}, 0)
	if lt.Len() != 2 {
		t.Fatalf("Len = %d", lt.Len())
	}
	if _, ok := lt.Renew(1); ok {
		t.Fatal("a session missing from ResetAll survived")
	}
	clk.Advance(10*time.Second - time.Nanosecond)
	if got := lt.Expired(0); len(got) != 0 {
		t.Fatalf("expired before a full TTL after the reset: %v", got)
	}
	clk.Advance(time.Nanosecond)
	if got := lt.Expired(0); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("Expired = %v, want [2]", got)
	}
	if d, ok := lt.NextDeadline(); !ok || !d.Equal(epoch.Add(24*time.Second)) {
		t.Fatalf("NextDeadline = %v", d)
	}
}

func TestLeaseTableWake(t *testing.T) {
	clk := NewManualClock(epoch)
	lt := NewLeaseTable(clk)
	lt.Add(1, time.Minute)
	drain(lt.Wake())
	lt.Add(2, 2*time.Minute) // later than the earliest: the reaper need not look
	select {
	case <-lt.Wake():
		t.Fatal("woken by a later deadline")
	default:
	}
	lt.Add(3, time.Second) // earlier: it must
	select {
	case <-lt.Wake():
	default:
		t.Fatal("not woken by an earlier deadline")
	}
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// A random history of adds, renews, removes, resets and clock steps: no
// session is ever returned by Expired earlier than its TTL after its last
// renew (or add or reset), every session past that is returned by a full
// Expired call, and batches come oldest deadline first.
func TestLeaseTableNeverExpiresEarly(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			clk := NewManualClock(epoch)
			lt := NewLeaseTable(clk)
			type model struct {
				ttl     time.Duration
				renewed time.Time
			}
			live := map[uint64]*model{}
			next := uint64(1)
			for range 2000 {
				now := clk.Now()
				switch op := rng.IntN(10); {
				case op < 3:
					ttl := time.Duration(1+rng.IntN(30)) * time.Second
					lt.Add(next, ttl)
					live[next] = &model{ttl, now}
					next++
				case op < 6 && len(live) > 0:
					id := pick(rng, live)
					if ttl, ok := lt.Renew(id); ok {
						live[id].renewed = now
						if ttl != live[id].ttl {
							t.Fatalf("Renew(%d) ttl %v, want %v", id, ttl, live[id].ttl)
						}
					}
				case op < 7 && len(live) > 0:
					id := pick(rng, live)
					lt.Remove(id)
					delete(live, id)
				case op < 8 && rng.IntN(20) == 0:
					all := map[uint64]time.Duration{}
					for id, m := range live {
						all[id] = m.ttl
						m.renewed = now
					}
					lt.ResetAll(all, 0)
				default:
					clk.Advance(time.Duration(rng.IntN(3000)) * time.Millisecond)
				}
				now = clk.Now()
				max := rng.IntN(4) // 0 = unbounded
				got := lt.Expired(max)
				var last time.Time
				for _, id := range got {
					m, ok := live[id]
					if !ok {
						t.Fatalf("Expired returned unknown or removed session %d", id)
					}
					deadline := m.renewed.Add(m.ttl)
					if now.Before(deadline) {
						t.Fatalf("session %d expired at %v, before %v (ttl %v after last renew)", id, now, deadline, m.ttl)
					}
					if deadline.Before(last) {
						t.Fatalf("batch %v not in deadline order", got)
					}
					last = deadline
					lt.Remove(id)
					delete(live, id)
				}
				if max == 0 {
					for id, m := range live {
						if !now.Before(m.renewed.Add(m.ttl)) {
							t.Fatalf("session %d past its deadline was not returned", id)
						}
					}
				}
			}
		})
	}
}

func pick[V any](rng *rand.Rand, m map[uint64]V) uint64 {
	ids := make([]uint64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids[rng.IntN(len(ids))]
}

func BenchmarkLeaseTableRenew(b *testing.B) {
	clk := NewManualClock(epoch)
	lt := NewLeaseTable(clk)
	const n = 100000
	for i := range uint64(n) {
		lt.Add(i, time.Duration(10+i%20)*time.Second)
	}
	b.ResetTimer()
	for i := range b.N {
		clk.Advance(time.Microsecond)
		lt.Renew(uint64(i % n))
	}
}

// Retime changes a lease's TTL for this and every later renewal, and
// refuses a lease whose expiry began.
func TestLeaseTableRetime(t *testing.T) {
	clk := NewManualClock(epoch)
	lt := NewLeaseTable(clk)
	lt.Add(1, 2*time.Second)
	if !lt.Retime(1, 30*time.Second) {
		t.Fatal("Retime of a live lease failed")
	}
	clk.Advance(20 * time.Second)
	if got := lt.Expired(0); len(got) != 0 {
		t.Fatalf("retimed lease expired at its old TTL: %v", got)
	}
	if ttl, ok := lt.Renew(1); !ok || ttl != 30*time.Second {
		t.Fatalf("Renew after Retime = %v, %v", ttl, ok)
	}
	lt.Retime(1, time.Second)
	clk.Advance(2 * time.Second)
	if got := lt.Expired(0); len(got) != 1 {
		t.Fatalf("shortened lease did not expire: %v", got)
	}
	if lt.Retime(1, time.Hour) {
		t.Fatal("Retime of an expiring lease succeeded")
	}
	if lt.Retime(2, time.Hour) {
		t.Fatal("Retime of an unknown session succeeded")
	}
}

// ExpiredBy hands out only the leases whose deadline is not after the
// cutoff: a leader holding expiry for the clients it refuses passes one
// before now.
func TestLeaseTableExpiredBy(t *testing.T) {
	clk := NewManualClock(epoch)
	lt := NewLeaseTable(clk)
	lt.Add(1, 10*time.Second)
	lt.Add(2, 20*time.Second)
	clk.Advance(30 * time.Second)
	if got := lt.ExpiredBy(0, clk.Now().Add(-15*time.Second)); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("ExpiredBy(now-15s) = %v, want [1]", got)
	}
	if got := lt.Expired(0); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("Expired afterwards = %v, want [2]", got)
	}
}

// Renewing a lease allocates nothing: every idle session renews every
// TTL/3 on the leader, and a renewal that allocated (a timer per
// session, a boxed heap entry) would make idle sessions cost GC work.
func TestLeaseTableRenewAllocatesNothing(t *testing.T) {
	lt := NewLeaseTable(NewManualClock(epoch))
	for id := uint64(1); id <= 1000; id++ {
		lt.Add(id, time.Duration(id)*time.Millisecond)
	}
	id := uint64(0)
	if n := testing.AllocsPerRun(1000, func() {
		id = id%1000 + 1
		if _, ok := lt.Renew(id); !ok {
			t.Fatalf("renew %d refused", id)
		}
	}); n != 0 {
		t.Fatalf("Renew: %.1f allocations per call, want 0", n)
	}
}
