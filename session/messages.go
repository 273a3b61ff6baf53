package session

import "github.com/latch-io/latch/namespace"

// ProtocolVersion is the wire protocol version a peer speaks. It is sent in
// Hello and carried in the ALPN token (ALPN), so a peer with another major
// version fails the TLS handshake or gets ErrVersion, never garbage.
const ProtocolVersion uint32 = 1

// ALPN is the TLS application protocol of latch connections.
const ALPN = "latch/1"

// WatchKind is a bitmask of what a watch reports.
type WatchKind uint8

// Watch kinds; combine with |.
const (
	WatchData      WatchKind = 1 << iota // data changes and deletion of Path
	WatchChildren                        // children created or deleted under Path
	WatchExists                          // creation and deletion of Path
	WatchRecursive                       // every event anywhere in Path's subtree
	// WatchLocks: lock events (granted, released, lost, contended) of the
	// requests on Path (with WatchRecursive: anywhere in its subtree).
	// Alone it reports no node events.
	WatchLocks
)

// LockMode is the mode of a lock request: namespace's, whose number the
// wire carries. The zero value is exclusive, the safe default.
type LockMode = namespace.LockMode

// Lock modes, namespace's under the names session's users know.
const (
	LockExclusive = namespace.LockExclusive
	LockShared    = namespace.LockShared
)

// LockPhase says what a MsgLock stream frame reports.
type LockPhase uint8

// Lock phases.
const (
	LockNone    LockPhase = iota // not a lock frame
	LockQueued                   // the request node exists; Node and Rev set
	LockGranted                  // the lock is held; Token and Node set
	LockGone                     // MsgLockNotices: the held lock Node went away; Message says why
)

// EventResync is a watch event type that namespace never produces: the
// server could not deliver every event since the client's revision (history
// compacted, or the consumer fell behind its buffer), so the client must
// re-read the state it watches. Rev is the revision to resume from.
const EventResync namespace.EventType = 255

// Request is the envelope of every client request; Type says which fields
// are read (see the MsgType constants). Fields are omitted from the wire
// when zero, so a decoder must start from a zeroed Request.
type Request struct {
	Type MsgType `codec:"t"`
	// Call is the request's id on the mux stream (see MsgMux); 0 on a
	// stream of its own.
	Call uint64 `codec:"cid,omitempty"`
	// Session is the session the request acts for (0 for none). The
	// connection must have opened or resumed it.
	Session uint64 `codec:"s,omitempty"`
	// Stale lets any member answer a read from its local state instead of
	// the leader confirming leadership first.
	Stale bool `codec:"st,omitempty"`
	// MinRev (a Stale read, a watch) is the highest revision the client
	// has seen: a member that has not applied it yet waits a moment for
	// it, then answers ErrBehind, so that a client's reads never go back
	// in time when it moves between members.
	MinRev uint64 `codec:"mrv,omitempty"`
	// Cache (a Get or Exists on the leader) asks to cache the node on the
	// connection's cache stream (MsgCache): the leader invalidates it
	// there before a write that changes it is acknowledged. The answer's
	// Cached says whether it was registered.
	Cache bool `codec:"ca,omitempty"`

	ProtocolVersion uint32 `codec:"pv,omitempty"` // Hello
	ClientName      string `codec:"cn,omitempty"` // Hello: for logs

	Secret    []byte `codec:"sec,omitempty"` // ResumeSession
	TTLMillis int64  `codec:"ttl,omitempty"` // OpenSession

	Path      string                `codec:"p,omitempty"`
	Data      []byte                `codec:"d,omitempty"`
	Flags     namespace.CreateFlags `codec:"f,omitempty"`
	Version   int64                 `codec:"v,omitempty"`
	Recursive bool                  `codec:"r,omitempty"` // Delete
	After     string                `codec:"a,omitempty"` // Children
	Limit     int32                 `codec:"lim,omitempty"`
	Ops       []Op                  `codec:"ops,omitempty"` // Multi

	Kind    WatchKind `codec:"k,omitempty"`  // Watch
	FromRev uint64    `codec:"fr,omitempty"` // Watch
	OneShot bool      `codec:"os,omitempty"` // Watch

	Mode            LockMode   `codec:"mo,omitempty"`  // Lock
	TimeoutMillis   int64      `codec:"to,omitempty"`  // Lock
	HoldTTLMillis   int64      `codec:"ht,omitempty"`  // Lock
	LockDelayMillis int64      `codec:"ld,omitempty"`  // Lock
	Node            string     `codec:"n,omitempty"`   // LockRelease, LockRenew; Lock: re-attach
	Sequencer       *Sequencer `codec:"sq,omitempty"`  // CheckSequencer
	Try             bool       `codec:"try,omitempty"` // Lock: fail with ErrLocked unless granted at once
	// RequestID (Lock, LockRelease) is the client's name for a lock
	// request, unique in its session: a Lock naming the id of a live
	// request of the session answers with that request (a retry after a
	// lost answer never queues a second one); a LockRelease with it and
	// no Node withdraws that request, if there is one.
	RequestID string `codec:"lk_rid,omitempty"`

	// Sessions (KeepAlive) are more sessions to renew with Session; see
	// MsgKeepAlive.
	Sessions []uint64 `codec:"ss,omitempty"`

	ACL []namespace.ACLRule `codec:"acl,omitempty"` // ACLSet, ACLRemove

	// Txn: the conditions and the else branch (Ops is the then branch).
	Compares []namespace.Compare `codec:"txn_if,omitempty"`
	Else     []Op                `codec:"txn_else,omitempty"`
}

// MaxKeepAliveBatch is the most sessions one KeepAlive may renew (Session
// plus Sessions). It keeps the answer, one result per session, far below
// the default frame limit: a larger batch is refused with ErrMalformed.
const MaxKeepAliveBatch = 1024

// Feature is a bitmask of optional protocol features a server announces
// in its Hello answer, so a client uses them only where they are served.
type Feature uint64

// Features. Append new ones; never renumber.
const (
	// FeatureKeepAliveBatch: one KeepAlive may renew many sessions
	// (Request.Sessions, Response.KeepAlives).
	FeatureKeepAliveBatch Feature = 1 << iota
	// FeatureMux: the server serves the mux stream (MsgMux), so unary
	// requests need not open a stream each.
	FeatureMux
	// FeatureLockCall: the server serves MsgLockCall.
	FeatureLockCall
	// FeatureCache: the server serves MsgCache (the client cache) and
	// Request.Cache.
	FeatureCache
	// FeatureLockNext: a MsgLock stream's LockQueued frame says whether
	// the request is next in line (Response.Next), and a waiter that
	// moves up to next gets another one with Next set. The client
	// watches the member closely (FailureTimeout) only for a waiter next
	// in line; one further back waits like a subscription.
	FeatureLockNext
)

// KeepAliveResult is one session's outcome in a batched KeepAlive.
type KeepAliveResult struct {
	Session   uint64 `codec:"s"`
	Code      Code   `codec:"c,omitempty"`   // CodeSessionExpired, CodeUnknownSession, ...
	Message   string `codec:"m,omitempty"`   // the error's message when Code != 0
	TTLMillis int64  `codec:"ttl,omitempty"` // the renewed lease when Code is CodeOK
}

// Err returns nil when the session was renewed, else its error (see
// Code.Err).
func (r *KeepAliveResult) Err() error { return r.Code.Err(r.Message) }

// Op is one operation of a Multi or a Txn. Type is namespace.OpCreate,
// OpSet, OpDelete or OpCheck, or in a Txn OpGet; anything else is
// rejected.
type Op struct {
	Type    namespace.Op          `codec:"t"`
	Path    string                `codec:"p,omitempty"`
	Data    []byte                `codec:"d,omitempty"`
	Flags   namespace.CreateFlags `codec:"f,omitempty"`
	Version int64                 `codec:"v,omitempty"`
}

// OpResult is the outcome of one Multi or Txn op.
type OpResult struct {
	Code    Code           `codec:"c,omitempty"`
	Message string         `codec:"m,omitempty"`
	Path    string         `codec:"p,omitempty"` // created path
	Stat    namespace.Stat `codec:"st,omitempty"`
	Data    []byte         `codec:"d,omitempty"` // a Txn get's data
}

// Err returns nil when the op succeeded, else its error (see Code.Err).
func (r *OpResult) Err() error { return r.Code.Err(r.Message) }

// Sequencer names a held lock: a resource server checks it with
// MsgCheckSequencer and rejects requests carrying a stale Token.
type Sequencer struct {
	Path    string   `codec:"p"`
	Mode    LockMode `codec:"mo,omitempty"`
	Token   uint64   `codec:"tk"`
	Session uint64   `codec:"s"`
}

// LockInfo describes one lock request in a MsgLockQueue answer. Times are
// the leader's clock in unix nanoseconds.
type LockInfo struct {
	Node            string   `codec:"n"` // request node; for a phantom, the deleted node's path
	Path            string   `codec:"p,omitempty"`
	Mode            LockMode `codec:"mo,omitempty"`
	Session         uint64   `codec:"s,omitempty"`
	Rev             uint64   `codec:"r,omitempty"` // the request's revision: its queue order
	HoldTTLMillis   int64    `codec:"ht,omitempty"`
	LockDelayMillis int64    `codec:"ld,omitempty"`
	Granted         bool     `codec:"g,omitempty"`
	Token           uint64   `codec:"tk,omitempty"`
	GrantTime       int64    `codec:"gt,omitempty"`
	Deadline        int64    `codec:"dl,omitempty"` // hold deadline; 0: none
	// Phantom: the holder was lost and lock-delay keeps the lock
	// unavailable until DelayEnd; the node is gone.
	Phantom  bool  `codec:"ph,omitempty"`
	DelayEnd int64 `codec:"de,omitempty"`
}

// WatchEvent is one change reported on a watch stream.
type WatchEvent struct {
	Type    namespace.EventType `codec:"t"`
	Path    string              `codec:"p,omitempty"`
	Rev     uint64              `codec:"r,omitempty"`
	Session uint64              `codec:"s,omitempty"`
	// Lock events (WatchLocks) only; see namespace.Event.
	Token         uint64   `codec:"tk,omitempty"`
	Mode          LockMode `codec:"m,omitempty"`
	Cause         string   `codec:"c,omitempty"`
	Waiter        string   `codec:"w,omitempty"`
	WaiterSession uint64   `codec:"ws,omitempty"`
}

// SessionInfo describes one session in a MsgSessions answer. The secret is
// never sent.
type SessionInfo struct {
	ID        uint64 `codec:"id"`
	TTLMillis int64  `codec:"ttl,omitempty"`
	Identity  string `codec:"idn,omitempty"`
	OpenRev   uint64 `codec:"or,omitempty"`
	OpenTime  int64  `codec:"ot,omitempty"` // unix nanos, leader clock
	// ExpiresInMillis is the lease left as the leader sees it (0 when the
	// answering member is not the leader).
	ExpiresInMillis int64 `codec:"ex,omitempty"`
}

// MemberInfo describes one cluster member in a MsgMembers answer.
type MemberInfo struct {
	ID         string `codec:"id"`
	RaftAddr   string `codec:"ra,omitempty"`
	ClientAddr string `codec:"ca,omitempty"`
	HTTPAddr   string `codec:"ha,omitempty"`
	APIAddr    string `codec:"aa,omitempty"` // the HTTP/JSON API (a gateway routes to it)
	Leader     bool   `codec:"l,omitempty"`
	Voter      bool   `codec:"v,omitempty"`
}

// StatusInfo describes the answering member in a MsgStatus answer.
type StatusInfo struct {
	ID           string `codec:"id"`
	State        string `codec:"s,omitempty"` // leader, follower, candidate, shutdown
	Term         uint64 `codec:"tm,omitempty"`
	CommitIndex  uint64 `codec:"ci,omitempty"`
	AppliedIndex uint64 `codec:"ai,omitempty"`
	LastIndex    uint64 `codec:"li,omitempty"`
	Sessions     int64  `codec:"ns,omitempty"`
	Watches      int64  `codec:"nw,omitempty"`
	Version      string `codec:"ver,omitempty"` // server build version
	// Stats holds further numbers (raft stats and the like) for display.
	Stats map[string]string `codec:"x,omitempty"`
}

// Response is the envelope of every server answer and of every frame of a
// streaming answer. Code 0 means success; otherwise Message explains and,
// for ErrNotLeader, Leader holds the leader's client address (empty when no
// leader is known).
type Response struct {
	// Call is the id of the call answered on the mux stream (see MsgMux).
	Call    uint64 `codec:"cid,omitempty"`
	Code    Code   `codec:"c,omitempty"`
	Message string `codec:"m,omitempty"`
	Leader  string `codec:"l,omitempty"`

	ProtocolVersion uint32  `codec:"pv,omitempty"` // Hello
	ServerID        string  `codec:"sid,omitempty"`
	Features        Feature `codec:"ft,omitempty"` // Hello

	Session   uint64 `codec:"s,omitempty"`
	Secret    []byte `codec:"sec,omitempty"`
	TTLMillis int64  `codec:"ttl,omitempty"`

	Path   string         `codec:"p,omitempty"`
	Data   []byte         `codec:"d,omitempty"`
	Stat   namespace.Stat `codec:"st,omitempty"`
	Exists bool           `codec:"e,omitempty"`
	// Cached answers a Request with Cache: the node is registered on the
	// connection's cache stream.
	Cached  bool       `codec:"cch,omitempty"`
	Names   []string   `codec:"ns,omitempty"`
	More    bool       `codec:"mr,omitempty"`
	Results []OpResult `codec:"rs,omitempty"`
	// Rev is the revision a write was applied at, or the applied revision a
	// read was served at (watch from Rev to miss nothing after the read).
	Rev uint64 `codec:"r,omitempty"`

	Events []WatchEvent `codec:"ev,omitempty"` // Watch frames

	Lock LockPhase `codec:"lk,omitempty"` // Lock frames
	Node string    `codec:"n,omitempty"`
	// Next: a LockQueued frame's request is next in line (see
	// FeatureLockNext).
	Next  bool       `codec:"nx,omitempty"`
	Token uint64     `codec:"tk,omitempty"`
	Valid bool       `codec:"ok,omitempty"` // CheckSequencer
	Locks []LockInfo `codec:"lq,omitempty"` // LockQueue
	// LockHistory answers MsgLockHistory.
	LockHistory []namespace.LockEvent `codec:"ops_lh,omitempty"`

	Sessions []SessionInfo `codec:"ss,omitempty"`
	Members  []MemberInfo  `codec:"mb,omitempty"`
	Status   *StatusInfo   `codec:"sts,omitempty"`

	KeepAlives []KeepAliveResult `codec:"ka,omitempty"` // batched KeepAlive

	ACL *ACLInfo `codec:"acl,omitempty"` // MsgACL

	Succeeded bool `codec:"txn_ok,omitempty"` // Txn: every compare held, the then branch ran
}

// ACLInfo is the replicated rule set in a MsgACL answer.
type ACLInfo struct {
	Enforced bool                `codec:"en,omitempty"`
	Default  namespace.Perm      `codec:"df,omitempty"`
	Rules    []namespace.ACLRule `codec:"rl,omitempty"`
}

// Err returns nil when r succeeded, else an error that errors.Is the
// sentinel for r.Code, carries the server's message and, for ErrNotLeader,
// can be unpacked with errors.As into *Error to read the leader address.
func (r *Response) Err() error {
	if r.Code == CodeOK {
		return nil
	}
	err := r.Code.Err(r.Message)
	if e, ok := err.(*Error); ok {
		e.Leader = r.Leader
	}
	return err
}

// ErrorResponse builds the Response a server sends for err: the code of its
// sentinel (CodeInternal when it has none), its message, and the leader
// address when err is an *Error carrying one.
func ErrorResponse(err error) *Response {
	r := &Response{}
	r.SetErr(err)
	return r
}

// SetErr sets r's Code, Message and Leader from err (nil clears them).
func (r *Response) SetErr(err error) {
	if err == nil {
		r.Code, r.Message, r.Leader = CodeOK, "", ""
		return
	}
	r.Code = CodeOf(err)
	r.Message = err.Error()
	var e *Error
	if asError(err, &e) && e.Leader != "" {
		r.Leader = e.Leader
	}
}
