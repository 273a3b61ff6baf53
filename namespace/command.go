package namespace

import (
	"fmt"
	"sync"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// Op names a state change.
type Op uint8

// Ops. Never renumber these, they are in raft logs on disk; append new ones.
const (
	OpNoop          Op = iota // tick: fires due lock timers; else advances the applied index and the clock only
	OpCreate                  // create Path (Flags, Data, Session for ephemerals)
	OpSet                     // set Path's Data if Version matches
	OpDelete                  // delete Path if Version matches and it has no children
	OpCheck                   // fail unless Path exists with Version; useful inside OpMulti
	OpMulti                   // apply Ops all-or-nothing
	OpSessionOpen             // open a session whose id is the command's index
	OpSessionClose            // the client closes Session
	OpSessionExpire           // the leader expires Sessions (a batch)
	OpSetMember               // record cluster member metadata
	OpRemoveMember            // forget the member Member.ID
	OpLockRequest             // Session queues a Mode lock on Path (lock.go)
	OpLockCancel              // Session gives up its request node Path, waiting or held
	OpLockRelease             // Session releases its held request node Path
	OpLockRenew               // Session extends the hold TTL of its held request node Path

	// ACLs (acl.go). Numbers 25-29 are the acl workstream's.
	OpACLBootstrap Op = 25 // enforce ACLs with default ACLDefault and first rules ACL, once
	OpACLSet       Op = 26 // Identity (admin on each prefix) sets the rules ACL
	OpACLRemove    Op = 27 // Identity (admin on each prefix) removes the rules ACL
)

// Ops after OpLockRenew are explicit constants in per-workstream ranges
// (settings.go: OpSetLimits = 15; txn.go: OpTxn = 30, OpGet = 31).

var opNames = [...]string{
	OpNoop:          "noop",
	OpCreate:        "create",
	OpSet:           "set",
	OpDelete:        "delete",
	OpCheck:         "check",
	OpMulti:         "multi",
	OpSessionOpen:   "session-open",
	OpSessionClose:  "session-close",
	OpSessionExpire: "session-expire",
	OpSetMember:     "set-member",
	OpRemoveMember:  "remove-member",
	OpLockRequest:   "lock-request",
	OpLockCancel:    "lock-cancel",
	OpLockRelease:   "lock-release",
	OpLockRenew:     "lock-renew",
	OpACLBootstrap:  "acl-bootstrap",
	OpACLSet:        "acl-set",
	OpACLRemove:     "acl-remove",
	OpSetLimits:     "set-limits",
	OpHashCheck:     "hash-check",
	OpTxn:           "txn",
	OpGet:           "get",
}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// CreateFlags modify OpCreate.
type CreateFlags uint8

// Create flags.
const (
	// FlagEphemeral ties the node to Command.Session: it is deleted when
	// the session closes or expires.
	FlagEphemeral CreateFlags = 1 << iota
	// FlagSequential appends the parent's sequential counter as %010d to
	// the last path component.
	FlagSequential
)

// AnyVersion in Command.Version skips the version check.
const AnyVersion int64 = -1

// Command is one state change; it is what the raft log carries (msgpack).
// Field tags are short and empty fields omitted to keep log entries small;
// the tags are a storage format: never change them.
type Command struct {
	Op        Op          `codec:"o"`
	Path      string      `codec:"p,omitempty"`
	Data      []byte      `codec:"d,omitempty"`
	Flags     CreateFlags `codec:"f,omitempty"`
	Version   int64       `codec:"v"`           // expected version for Set/Delete/Check; AnyVersion = unconditional
	Session   uint64      `codec:"s,omitempty"` // owner of an ephemeral create; the session of OpSessionClose; the caller's session on set/delete (ownership)
	Sessions  []uint64    `codec:"ss,omitempty"`
	Secret    []byte      `codec:"sec,omitempty"` // OpSessionOpen: chosen by the leader, checked on resume
	TTLMillis int64       `codec:"ttl,omitempty"` // OpSessionOpen
	// Identity is the client's TLS identity ("" without a certificate):
	// recorded by OpSessionOpen, and checked against the ACL rules by every
	// client command (a multi's, not its ops'). Server-made commands
	// (ticks, expiry, members, ACL bootstrap) carry none and are not checked.
	Identity string `codec:"id,omitempty"`
	// Host is OpSessionOpen's client IP address, recorded only for clients
	// without a certificate (their session quota is per host).
	Host   string    `codec:"acl_h,omitempty"`
	Ops    []Command `codec:"ops,omitempty"` // OpMulti; OpTxn's then branch
	Member *Member   `codec:"m,omitempty"`   // OpSetMember; OpRemoveMember uses only ID

	// OpLockRequest: the mode, an optional hold TTL (0: held until
	// released) and the lock-delay applied when the holder is lost (0: the
	// Limits default, NoLockDelay: none).
	Mode            LockMode `codec:"lm,omitempty"`
	HoldTTLMillis   int64    `codec:"lh,omitempty"`
	LockDelayMillis int64    `codec:"ld,omitempty"`
	// Try: grant at once or fail with ErrLocked, creating nothing (no
	// node, no event) — decided here, in one command.
	Try bool `codec:"lk_try,omitempty"`
	// RequestID is the client's name for a lock request, unique within its
	// session: a request naming the id of a live request of the session
	// (a retry after a lost answer) returns that request instead of
	// queueing a second one.
	RequestID string `codec:"lk_rid,omitempty"`

	// OpACLBootstrap, OpACLSet, OpACLRemove: the rules; OpACLBootstrap's
	// default rights.
	ACL        []ACLRule `codec:"acl,omitempty"`
	ACLDefault Perm      `codec:"acl_d,omitempty"`
	// OpSetLimits: the complete new cluster settings (settings.go).
	Limits *Limits `codec:"st_lim,omitempty"`
	// OpLockCancel: the client withdrew the request (it gave up waiting,
	// or its lock stream broke) rather than releasing it; the lock
	// history says "canceled" instead of "released" for a held lock.
	Withdrawn bool `codec:"ops_wd,omitempty"`

	// OpTxn (txn.go): the conditions; Ops is the branch run when every
	// compare holds, Else the branch run otherwise.
	Compares []Compare `codec:"txn_if,omitempty"`
	Else     []Command `codec:"txn_else,omitempty"`
}

// Member is one cluster member's addresses, kept in the namespace so that
// every member can redirect clients to the leader.
type Member struct {
	ID         string `codec:"id"`
	RaftAddr   string `codec:"r,omitempty"`
	ClientAddr string `codec:"c,omitempty"`
	HTTPAddr   string `codec:"h,omitempty"`
	// APIAddr is the member's HTTP/JSON API address (followers forward
	// API requests to the leader's).
	APIAddr string `codec:"api_addr,omitempty"`
}

// Entry is what the server puts in a raft log entry: the leader's clock
// stamp (unix nanoseconds) and the command.
type Entry struct {
	Time int64   `codec:"t"`
	Cmd  Command `codec:"c"`
}

// entryHandle is configured once and never changed: it is shared by every
// encoder and decoder (codec handles are safe for concurrent use).
var entryHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.WriteExt = true
	h.RawToString = true
	// Entry -> Cmd -> Ops (or a txn's Else) -> Command -> Member is depth
	// 5; anything deeper is garbage, and the cap keeps hostile nesting off
	// the stack.
	h.MaxDepth = 8
	// Never trust a length header for an allocation.
	h.MaxInitLen = 4096
	// A field this version does not know means a command from a newer
	// version with semantics this one would silently drop: refuse it.
	h.ErrorIfNoField = true
	return h
}()

// The reflection decoder is the fast decoder's fallback (entrycodec.go)
// and reads the settings and lock history records. Decoders are reused:
// making one costs several allocations. One that failed is dropped, in
// case it was left half-way through a value.
var entryDecoders = sync.Pool{New: func() any { return codec.NewDecoderBytes(nil, entryHandle) }}

var noBytes = []byte{}

// EncodeEntry encodes e for the raft log: the bytes entryHandle's encoder
// writes, made by hand (entrycodec.go) in one allocation of their size.
func EncodeEntry(e *Entry) ([]byte, error) {
	return mpEntry(make([]byte, 0, mpEntrySize(e)), e), nil
}

// DecodeEntry decodes a raft log entry. It never panics: garbage yields an
// error wrapping ErrMalformed.
func DecodeEntry(b []byte) (e *Entry, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, err = nil, fmt.Errorf("%w: %v", ErrMalformed, r)
		}
	}()
	if e, ok := decodeEntryFast(b); ok {
		return e, nil
	}
	return decodeEntryReflect(b)
}

// decodeEntryReflect is DecodeEntry by go-msgpack's reflection decoder
// (the caller recovers its panics).
func decodeEntryReflect(b []byte) (*Entry, error) {
	e := new(Entry)
	d := entryDecoders.Get().(*codec.Decoder)
	d.ResetBytes(b)
	if err := d.Decode(e); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if n := d.NumBytesRead(); n != len(b) {
		return nil, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(b)-n)
	}
	d.ResetBytes(noBytes) // not to keep the entry alive (nil is ignored)
	entryDecoders.Put(d)
	return e, nil
}
