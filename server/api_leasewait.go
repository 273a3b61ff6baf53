package server

import "time"

// keepWaiting renews the implicit lease sid while its acquire's long poll
// waits, as a client's keepalives would: nothing else can renew it (its
// lease token is answered only with the grant), so without this a waiter
// whose ttl_ms is shorter than its wait_timeout_ms would lose its session,
// and its place in the queue, before it is granted. It renews at a third
// of the lease's TTL, on this member's lease table (the acquire runs on
// the leader); a lease that ends anyway (a leader change, an expiry
// decided first) ends the loop. The returned stop ends it with the request:
// from then on the lease lives on the holder's renewals alone.
func (a *apiFront) keepWaiting(sid uint64) (stop func()) {
	done := make(chan struct{})
	ended := make(chan struct{})
	a.s.goFunc(func() {
		defer close(ended)
		ttl, ok := a.f.keep.Renew(sid)
		for ok && ttl > 0 {
			t := time.NewTimer(max(ttl/3, time.Millisecond))
			select {
			case <-done:
				t.Stop()
				return
			case <-a.s.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			ttl, ok = a.f.keep.Renew(sid)
		}
	})
	return func() {
		close(done)
		<-ended
	}
}
