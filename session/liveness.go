package session

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
)

// Liveness: how a client notices a silent member fast without pinging
// idle connections.
//
// QUIC's own keep-alive and idle timeout (Config.KeepAlivePeriod,
// MaxIdleTimeout) are the slow guard: they run all the time, so they must
// be cheap with thousands of idle connections. Fast detection
// (Config.FailureTimeout) is only worth its packets while a call waits on
// the member: a request in flight or a stream somebody blocks on (a lock
// wait, a barrier's watch: OpenStreaming; the mux stream that carries
// unary calls counts by its calls). Subscriptions (OpenSubscription: the
// lock notices stream, a watch) do not count: a client that only holds
// them is an idle one. While a call waits, the client's watchdog sends a
// ping, one QUIC DATAGRAM carrying its send time, each time a quarter of
// FailureTimeout passes without hearing from the member (an echo of a
// newer ping, or any answer read on the connection: a busy connection
// sends no pings), and closes the connection when
// FailureTimeout passed without hearing and the oldest unanswered ping is
// three quarters of it old (as QUIC's own ping and idle timeout did;
// stretched, like QUIC's, to three probe timeouts when round trips are
// long). A member that leaves the pings unechoed but whose QUIC stack
// still acknowledges them is slow, not dead: it gets slowFactor ×
// FailureTimeout. The
// member echoes every ping it receives (EchoPings). An echo proves
// the member was alive when its ping was sent, however late the client
// reads it, so echoes queued while idle never vouch for the present.
//
// Datagrams are inside the connection: encrypted and authenticated, not
// retransmitted (a lost ping is followed by the next), congestion
// controlled, and queued in bounded quic-go queues on both sides (a
// flooding peer loses datagrams, never grows memory). A member that does
// not negotiate datagrams gets no pings: its clients fall back to the
// idle timeout.
//
// The connection's lock notices stream (MsgLockNotices) is open for the
// connection's life and waits for nothing in particular: it does not
// count as a waiting call, so a client holding locks and nothing else
// sends no fast pings.

// pingSize is the size of a ping and its echo: the client's send time, in
// nanoseconds since the watchdog started. Datagrams of another size are
// not echoed.
const pingSize = 8

// watchdog closes a client connection whose member stopped echoing
// pings while a call waited. One goroutine per connection, ending with
// it.
type watchdog struct {
	conn    *Conn
	failure time.Duration
	start   time.Time
	waiting atomic.Int64
	wake    chan struct{} // buffered 1: a call started waiting
	pings   atomic.Uint64 // pings sent, for tests and metrics
	// frame is when (since start) the client last read a frame from the
	// member: an answer proves it alive as well as an echo does, so a
	// connection whose calls are being answered needs no pings.
	frame atomic.Int64
	// patience is how long the member took to let this client in (its
	// handshake), doubled and capped at maxPatience: a member that took
	// seconds to admit a client is loaded (a reconnect storm), and a
	// silence shorter than that from it is no sign of death. Giving it up
	// then only sent the client back into the storm: after a SIGKILL of
	// a leader holding 3,000 sessions, the new leader completed 13,176
	// handshakes for those 3,000 clients. It applies for patienceWindow
	// after the connection was made; on a quiet member (handshakes of
	// milliseconds) it is below FailureTimeout and changes nothing.
	patience time.Duration
}

// maxPatience caps patience; patienceWindow is how long it lasts.
// slowFactor × FailureTimeout is how long a member whose QUIC stack still
// sends (acknowledgements of the pings) may leave the pings unechoed:
// alive but slow, its echoes wait for a CPU behind a reconnect storm or a
// cache invalidation fan-out, and giving it up sent the client back into
// the storm (1,571 connections closed "member silent" in one 1,000-client
// storm). A member that stopped, crashed or was cut off sends nothing at
// all, and is still given up after FailureTimeout.
const (
	maxPatience    = 5 * time.Second
	patienceWindow = 30 * time.Second
	slowFactor     = 10
)

// heard records that a frame from the member was just read. Frames are
// read by goroutines blocked on their streams, as they arrive, so the
// read time stands for the arrival.
func (w *watchdog) heard() {
	if w != nil {
		w.frame.Store(int64(w.since()))
	}
}

func newWatchdog(conn *Conn, failure, handshake time.Duration) *watchdog {
	return &watchdog{conn: conn, failure: failure, start: time.Now(), wake: make(chan struct{}, 1),
		patience: min(2*handshake, maxPatience)}
}

// begin counts a call waiting on the connection; call the returned func
// (once) when it stops waiting.
func (w *watchdog) begin() func() {
	if w == nil {
		return func() {}
	}
	if w.waiting.Add(1) == 1 {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	var done atomic.Bool
	return func() {
		if done.CompareAndSwap(false, true) {
			w.waiting.Add(-1)
		}
	}
}

func (w *watchdog) since() time.Duration { return time.Since(w.start) }

// run waits for calls and watches the member while any waits.
func (w *watchdog) run() {
	ctx := w.conn.Context()
	for {
		select {
		case <-w.wake:
		case <-ctx.Done():
			return
		}
		if !w.watch(ctx) {
			return
		}
	}
}

// watch pings while calls wait. It returns false when it closed the
// connection or the connection ended.
//
// The member gets three quarters of FailureTimeout after the first ping
// it left unanswered, counted by this goroutine: when the goroutine
// itself runs late (a loaded machine), it pings before it gives up, and
// it reads any echo already queued before closing.
func (w *watchdog) watch(ctx context.Context) bool {
	quarter := w.failure / 4
	// Silence is counted from now at the earliest: an idle connection
	// heard nothing for long, rightly.
	heard := w.since()
	pinged, unanswered := time.Duration(-1), time.Duration(-1) // send times: the last ping, the oldest one after heard
	// packetSeen is when the member's QUIC stack last sent something, at
	// the earliest it can have been: a rise in the count is dated to the
	// previous look at it, so a dead member is given up no later than
	// one whose echoes stopped.
	packets, packetSeen, looked := w.conn.ConnectionStats().PacketsReceived, heard, heard
	for w.waiting.Load() > 0 {
		st := w.conn.ConnectionStats()
		now := w.since()
		if st.PacketsReceived != packets {
			packets, packetSeen = st.PacketsReceived, looked
		}
		looked = now
		failure := w.limitFor(st)
		if now-packetSeen < failure {
			// The member's QUIC stack still sends (it acknowledges the
			// pings within max_ack_delay): slow, not dead.
			failure = max(failure, slowFactor*w.failure)
		}
		heard = max(heard, time.Duration(w.frame.Load()))
		if now-heard >= quarter && (pinged <= heard || now-pinged >= quarter) {
			w.ping(now)
			pinged = now
			if unanswered < 0 {
				unanswered = now
			}
		}
		if unanswered >= 0 && now-heard >= failure && now-unanswered >= failure-quarter {
			if !w.receive(ctx, time.Millisecond, &heard) {
				if ctx.Err() == nil {
					w.conn.CloseWithError(ConnClosed, fmt.Sprintf("latch: member silent for %v while a call waited", failure.Round(time.Millisecond)))
				}
				return false
			}
		} else {
			next := heard + quarter
			if pinged > heard {
				next = pinged + quarter
			}
			if unanswered >= 0 {
				next = min(next, max(heard+failure, unanswered+failure-quarter))
			}
			w.receive(ctx, next-now, &heard)
		}
		if ctx.Err() != nil {
			return false
		}
		if heard >= unanswered {
			unanswered = -1
		}
	}
	return true
}

// limitFor is FailureTimeout, stretched to three probe timeouts (RFC 9002
// 6.2.1, as quic-go computes them) when the path's round trips grew: QUIC's
// own idle timeout stretches the same way, so a member slowed by load is
// not given up sooner than QUIC would, while a dead one on a healthy path
// still is within FailureTimeout. st is the connection's stats of this look.
func (w *watchdog) limitFor(st quic.ConnectionStats) time.Duration {
	pto := st.SmoothedRTT + max(4*st.MeanDeviation, time.Millisecond) + maxAckDelay
	limit := max(w.failure, 3*pto)
	if w.since() < patienceWindow {
		limit = max(limit, w.patience)
	}
	return limit
}

// maxAckDelay is quic-go's max_ack_delay (the QUIC default, RFC 9000
// 18.2), which it adds to the probe timeout.
const maxAckDelay = 25 * time.Millisecond

// ping sends one ping stamped with its send time.
func (w *watchdog) ping(now time.Duration) {
	var buf [pingSize]byte
	binary.BigEndian.PutUint64(buf[:], uint64(now))
	if w.conn.SendDatagram(buf[:]) == nil {
		w.pings.Add(1)
	}
}

// receive waits up to d for an echo and moves heard to its ping's send
// time. An echo already queued is returned at once whatever d.
func (w *watchdog) receive(ctx context.Context, d time.Duration, heard *time.Duration) bool {
	rctx, cancel := context.WithTimeout(ctx, max(d, time.Millisecond))
	defer cancel()
	echo, err := w.conn.ReceiveDatagram(rctx)
	if err != nil || len(echo) != pingSize {
		return false
	}
	// An echo can only carry a time this side sent (QUIC authenticates
	// it); a buggy member's echo from the future vouches for no more
	// than now.
	*heard = max(*heard, min(time.Duration(binary.BigEndian.Uint64(echo)), w.since()))
	return true
}

// EchoPings answers the client's liveness pings (see watchdog) until the
// connection ends: every datagram of pingSize is sent back as it came,
// and counted in echoed when it is not nil. Servers run it on every
// connection that negotiated datagrams; it costs a goroutine blocked on
// the connection and nothing per idle second.
func (c *Conn) EchoPings(echoed *atomic.Uint64) {
	if !c.ConnectionState().SupportsDatagrams.Remote {
		return
	}
	ctx := c.Context()
	for {
		b, err := c.ReceiveDatagram(ctx)
		if err != nil {
			return
		}
		if len(b) != pingSize {
			continue
		}
		// SendDatagram blocks while quic-go's send queue is full: a peer
		// that pings faster than the path carries is slowed, not buffered.
		if err := c.SendDatagram(b); err != nil {
			return
		}
		if echoed != nil {
			echoed.Add(1)
		}
	}
}

// Watched reports whether a watchdog watches c while calls wait on it (a
// client connection with Config.FailureTimeout to a member that
// negotiated datagrams): a call on it that waits long waits on a member
// that is alive, for the watchdog closes the connection to one that went
// silent.
func (c *Conn) Watched() bool { return c.dog != nil }

// Pings returns how many liveness pings this side sent on c (0 on a
// server connection or without Config.FailureTimeout).
func (c *Conn) Pings() uint64 {
	if c.dog == nil {
		return 0
	}
	return c.dog.pings.Load()
}
