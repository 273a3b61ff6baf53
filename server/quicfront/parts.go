package quicfront

import (
	"context"
	"log/slog"
	"time"

	"github.com/latch-io/latch/session"
)

// Config is the member's settings the front runs by (the member's Config
// fields of the same names; it fills their defaults and validates them).
type Config struct {
	// ID is the member's id, named in Hello answers and probe answers.
	ID string
	// Addr is the UDP address to listen on (port 0: any).
	Addr string
	// Transport is the QUIC and framing settings (defaults filled).
	Transport session.Config
	// Admission bounds how fast new connections are let in (defaults
	// filled).
	Admission AdmissionConfig
	// MaxConns bounds the client connections open at once.
	MaxConns int
	// MaxStreams bounds the request streams in flight on all connections,
	// MaxRequestsPerConn those of one connection.
	MaxStreams, MaxRequestsPerConn int
	// IdleConnTimeout closes a connection that has no session and no
	// request for that long.
	IdleConnTimeout time.Duration
	// RequestReadTimeout bounds the wait for a stream's request frame.
	RequestReadTimeout time.Duration
	// MaxFailedResumesPerHost is the failed session resumes a second one
	// client host may cause (resumelimit.go).
	MaxFailedResumesPerHost int
	// Monotonic measures elapsed time for the resume limiter's tokens.
	Monotonic func() time.Duration
	Log       *slog.Logger
}

// Leadership is this member's leadership as probe answers and the
// step-down watch read it.
type Leadership interface {
	// Serving returns nil when this member serves sessions (the ready
	// leader with its lease table loaded).
	Serving() error
	// LeaderClientAddr is the client address of another member this one
	// follows as the leader and can vouch for; "" when it knows none.
	LeaderClientAddr() string
	// SubscribeLeadership delivers whether this member is the ready
	// leader on every change until cancel.
	SubscribeLeadership() (sub <-chan bool, cancel func())
}

// Requests is what the member adds around every request its handlers
// answer.
type Requests interface {
	// Check refuses a request before its handler runs, for what the
	// member does not serve (a path outside its cell).
	Check(req *session.Request) error
	// WireError turns an error of the member's into the protocol's.
	WireError(err error) error
	// Served books a request's outcome (metrics): start is zero for a
	// streaming request or one refused before its handler ran.
	Served(t session.MsgType, start time.Time, err error, unary bool)
}

// TicketKeys are the other members' TLS session ticket keys.
type TicketKeys interface {
	// PeerTicketKeys fetches every other member's key; complete reports
	// whether all of them answered. Nil keys and not complete: the
	// member cannot tell who the others are yet (the keys stay as they
	// are).
	PeerTicketKeys(ctx context.Context) (keys [][32]byte, complete bool)
}

// Parts are what a Front works through, given by the member.
type Parts struct {
	Leader   Leadership
	Requests Requests
	Tickets  TicketKeys
	// Go runs f on a goroutine the member owns and waits for when it
	// closes.
	Go func(f func())
	// Closed, when not nil, is called when a connection ended, after its
	// streams (the lock service forgets the locks it followed for it).
	Closed func(c *Conn)
}

// Stats are the front's counters and gauges, for the member's metrics.
type Stats struct {
	// Streams is the request streams in flight (MaxStreams' use).
	Streams int
	// RefusedConns and RefusedStreams count refusals at MaxConns and
	// MaxStreams.
	RefusedConns, RefusedStreams uint64
	PingsEchoed                  uint64
	// FullHandshakes and ResumedHandshakes count accepted connections.
	FullHandshakes, ResumedHandshakes uint64
	// ResumeFailures counts failed session resumes; ResumeRefusedConn
	// and ResumeRefusedHost those the limiter refused, by its bucket.
	ResumeFailures, ResumeRefusedConn, ResumeRefusedHost uint64
	Admission                                            AdmissionStats
}

// AdmissionStats are admission control's and the queue's counters.
type AdmissionStats struct {
	// Refused counts refusals by reason (RefusalReasons).
	Refused map[string]uint64
	// Rate is the handshake rate now; InFlight the handshakes started and
	// not ended.
	Rate     float64
	InFlight int
	// Ends counts ended handshakes: failed, abandoned, full, resumed.
	Ends map[string]uint64
	// Queue counts reservations: made, used, expired, busy.
	Queue map[string]uint64
	// QueueWaited sums the waits given; QueueNow is the wait a reconnect
	// asking now would be told; QueueHeld the reservations held.
	QueueWaited, QueueNow time.Duration
	QueueHeld             int
	// SchedLag is the worst scheduler lateness of the last interval.
	SchedLag time.Duration
}

// RefusalReasons are the reasons admission control refuses for, the
// values of AdmissionStats.Refused's keys.
var RefusalReasons = []string{refusedRate, refusedInFlight, refusedHost, droppedProbe}

// Stats returns the front's counters now.
func (f *Front) Stats() Stats {
	a := f.adm
	st := Stats{
		Streams:           len(f.streams),
		RefusedConns:      f.refusedConns.Load(),
		RefusedStreams:    f.refusedStreams.Load(),
		PingsEchoed:       f.pingsEchoed.Load(),
		FullHandshakes:    f.handshakes[0].Load(),
		ResumedHandshakes: f.handshakes[1].Load(),
		ResumeFailures:    f.resumes.failures.Load(),
		ResumeRefusedConn: f.resumes.refusedConn.Load(),
		ResumeRefusedHost: f.resumes.refusedHost.Load(),
		Admission: AdmissionStats{
			Refused:  map[string]uint64{},
			Rate:     float64(a.rateNow.Load()),
			InFlight: a.handshaking(),
			Ends:     map[string]uint64{},
			Queue: map[string]uint64{
				"made": a.qstats.made.Load(), "used": a.qstats.used.Load(),
				"expired": a.qstats.expired.Load(), "busy": a.qstats.busy.Load(),
			},
			QueueWaited: time.Duration(a.qstats.waited.Load()),
			QueueNow:    a.queueWait(),
			QueueHeld:   a.reservations(),
			SchedLag:    time.Duration(a.lagNanos.Load()),
		},
	}
	for _, reason := range RefusalReasons {
		st.Admission.Refused[reason] = a.refusals(reason)
	}
	for how, end := range []string{"failed", "abandoned", "full", "resumed"} {
		st.Admission.Ends[end] = a.ends[how].Load()
	}
	return st
}

// RefusedWithin reports whether admission control refused a connection
// attempt for load (or queued or told one busy) within d, or a client
// holds a reservation now (lease.Admission).
func (f *Front) RefusedWithin(d time.Duration) bool { return f.adm.refusedWithin(d) }

// TakingIn reports whether clients are still being taken in: refused for
// load, queued or told busy, or a handshake ended, within d, or one is in
// flight or reserved now (lease.Admission).
func (f *Front) TakingIn(d time.Duration) bool { return f.adm.takingIn(d) }
