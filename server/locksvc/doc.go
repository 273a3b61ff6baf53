// Package locksvc is a member's lock service: locks over the wire. The
// lock state machine lives in the namespace's store (OpLockRequest,
// OpLockCancel, OpLockRelease, OpLockRenew; grants happen inside Apply);
// this package connects it to clients and to time.
//
// A member makes one Service (New) and gives it what it declares in
// parts.go: its lock index (Store), a Proposer for lock commands, its
// Leadership, its session Leases, the checks its request handlers share
// (Front), the cluster Clock and a logger. It feeds it every applied
// batch (Applied, on the FSM goroutine), runs RunTimers, routes the lock
// requests to the handlers (Call, Release, Renew, CheckSequencer, Queue,
// ServeNotices), runs MsgLock streams and the HTTP long poll through
// Acquire with a Caller of its own, and calls ConnClosed when a client
// connection ends. A connection is a Conn: the service never sees the
// transport. Files: service.go the waiter registry and the apply
// observer; acquire.go the one acquisition engine; requests.go the unary
// calls; notices.go the held locks followed and their notices stream;
// timers.go the leader's ticks.
//
// Design:
//
//   - MsgLockCall proposes a request as a unary call (on the mux stream)
//     and answers at once: granted, with the token, or queued, and the
//     client then waits on a MsgLock{Node} stream. A free lock, the
//     common case, costs no stream of its own.
//   - MsgLock proposes a request and streams its progress. Waiters are
//     keyed by their request node in a registry fed by the apply observer:
//     a grant wakes exactly the stream of the request granted, never the
//     other waiters (no herd).
//   - A waiter learns when its request is next in line (the first one
//     that cannot run yet, the store's NextInLine): in its LockQueued
//     frame, or in a second one with Next when the request ahead of it is
//     granted or withdrawn. Applied looks up the next request of each
//     queue a batch moved (one lookup per queue, not per waiter) and wakes
//     that waiter alone. The client watches the leader closely
//     (FailureTimeout pings) only for a waiter next in line; the others
//     wait like subscriptions, at the connection's idle pace: with 256
//     waiters on 8 locks every waiter pinging every 75 ms cost the leader
//     about 3,400 datagrams and echoes a second, more than the handoffs
//     themselves. A failover still reaches the waiter the new leader
//     grants next within FailureTimeout; the ones behind it notice with
//     their session's next renewal (TTL/3) at the latest. A queue moved
//     in a way the lookup does not see (a lock below or above the path
//     released) only delays that notice: nothing but liveness depends on
//     it.
//   - The stream ends at the grant: a held lock is not a request in
//     flight and costs no request slot, no stream and no goroutine. The
//     member follows it for the connection it was granted to (held, by
//     node) and, when it goes away (hold TTL, node deleted, session
//     ended, released), queues a notice for that connection, delivered on
//     its one MsgLockNotices stream, so a client learns at once that it
//     lost a lock. A held lock costs the member two map entries. A release
//     that the following connection asked for itself (MsgLockRelease) is
//     no news to it: its answer says so, and no notice follows.
//   - A stream the client resets while its connection lives is a client
//     that gave up: the request is withdrawn, or the lock released when
//     the grant raced the reset (OpLockCancel does both). A reset that
//     comes after the grant was written finds the stream ended: the
//     member cannot tell it from a delivered grant, so the client, which
//     knows it did not deliver the grant, withdraws the request itself
//     (MsgLockRelease) whenever a Lock gives up. A lost
//     connection leaves the request in place: the client re-attaches to
//     it with MsgLock{Node} on whichever member leads next, keeping its
//     place in the queue; if the client is gone for good, its session
//     expires and takes the request with it.
//   - A request whose proposal commits after its stream ended is
//     withdrawn at once: nobody learned its node. (A client that lost
//     the answer to a failover sends it again with its RequestID and gets
//     the request the cluster has.)
//   - The leader proposes ticks (OpNoop stamped with its clock) when the
//     namespace's NextTimer is due, so lock-delays end and hold TTLs
//     expire through the log. The loop wakes after every applied batch
//     that granted or lost a lock and runs only while this member is the
//     ready leader.
//
// Lock-delay defaults and bounds are the replicated cluster settings
// DefaultLockDelayMillis (5s) and MaxLockDelayMillis (60s)
// (server/settings.go).
package locksvc
