package client

import (
	"fmt"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// Options are small interfaces so that the compiler rejects an option
// where it means nothing (Ephemeral on a Get), while an option that means
// the same thing in two places (WithVersion on Set and Delete, Recursive on
// Delete and Watch) is one function.

// CreateOption modifies Create and OpCreate.
type CreateOption interface{ applyCreate(*createOptions) }

// ReadOption modifies Get, Stat and Exists.
type ReadOption interface{ applyRead(*readOptions) }

// ChildrenOption modifies Children.
type ChildrenOption interface{ applyChildren(*childrenOptions) }

// SetOption modifies Set and OpSet.
type SetOption interface{ applySet(*setOptions) }

// DeleteOption modifies Delete and OpDelete.
type DeleteOption interface{ applyDelete(*deleteOptions) }

// WatchOption modifies Watch.
type WatchOption interface{ applyWatch(*watchOptions) }

type createOptions struct{ flags namespace.CreateFlags }

type readOptions struct{ stale, cached bool }

type childrenOptions struct {
	stale bool
	after string
	limit int
}

type setOptions struct{ version int64 }

type deleteOptions struct {
	version   int64
	recursive bool
}

type watchOptions struct {
	kind    session.WatchKind
	fromRev uint64
	oneShot bool
	waits   bool // somebody blocks on the watch (waitingWatch)
}

// waitingWatch marks a watch that a blocking call waits on (Barrier.Wait,
// a semaphore's queue): it counts as a waiting call for the connection's
// failure detection (Config.FailureTimeout), where a plain watch is a
// subscription that does not.
type waitingWatch struct{}

func (waitingWatch) applyWatch(o *watchOptions) { o.waits = true }

type flagOption namespace.CreateFlags

func (f flagOption) applyCreate(o *createOptions) { o.flags |= namespace.CreateFlags(f) }

// Ephemeral makes the created node belong to the session the call is made
// on (Client calls use the default session; see Session.Create): the node
// vanishes when that session is closed or expires. Ephemeral nodes cannot
// have children.
func Ephemeral() CreateOption { return flagOption(namespace.FlagEphemeral) }

// Sequential appends the parent's sequence counter to the last path
// component as %010d; Create returns the resulting path.
func Sequential() CreateOption { return flagOption(namespace.FlagSequential) }

// StaleOption is returned by Stale.
type StaleOption struct{}

func (StaleOption) applyRead(o *readOptions)         { o.stale = true }
func (StaleOption) applyChildren(o *childrenOptions) { o.stale = true }

// Stale lets a nearby member (the client's read member: a follower or
// learner, see Config.ReadEndpoints) answer from its local state without
// the leader confirming leadership: reads scale with members, but may
// miss writes acknowledged a moment ago by other clients. A Stale read is
// monotonic for the client: it never returns state older than any the
// client already saw (its own writes included), whichever member answers.
// Reads are linearizable without it.
func Stale() StaleOption { return StaleOption{} }

// CachedOption is returned by Cached.
type CachedOption struct{}

func (CachedOption) applyRead(o *readOptions) { o.cached = true }

// Cached answers Get, Stat and Exists from the client cache when it holds
// the node, without a round trip, and otherwise reads from the leader and
// caches the answer (data, metadata and existence). A cached read is
// consistent: the leader invalidates the copy before a write that changes
// the node is acknowledged, so it never returns a value older than a write
// that completed before the read began (see the package documentation).
func Cached() CachedOption { return CachedOption{} }

type afterOption string

func (a afterOption) applyChildren(o *childrenOptions) { o.after = string(a) }

// After makes Children start after the child name (exclusive), for
// resuming a listing.
func After(name string) ChildrenOption { return afterOption(name) }

type limitOption int

func (l limitOption) applyChildren(o *childrenOptions) { o.limit = int(l) }

// Limit makes Children return at most n names (n <= 0: no limit).
func Limit(n int) ChildrenOption { return limitOption(n) }

// VersionOption is returned by WithVersion.
type VersionOption struct{ v int64 }

func (v VersionOption) applySet(o *setOptions)       { o.version = v.v }
func (v VersionOption) applyDelete(o *deleteOptions) { o.version = v.v }

// WithVersion makes Set or Delete fail with ErrBadVersion unless the node's
// data version is v (a node starts at version 0; every Set adds one).
func WithVersion(v int64) VersionOption { return VersionOption{v} }

// RecursiveOption is returned by Recursive.
type RecursiveOption struct{}

func (RecursiveOption) applyDelete(o *deleteOptions) { o.recursive = true }
func (RecursiveOption) applyWatch(o *watchOptions)   { o.kind |= session.WatchRecursive }

// Recursive makes Delete remove the node's whole subtree, and makes Watch
// report every event anywhere in the watched subtree.
func Recursive() RecursiveOption { return RecursiveOption{} }

type kindOption session.WatchKind

func (k kindOption) applyWatch(o *watchOptions) { o.kind |= session.WatchKind(k) }

// Data makes Watch report changes of the node's data and its deletion.
func Data() WatchOption { return kindOption(session.WatchData) }

// Children makes Watch report children created or deleted under the node.
func Children() WatchOption { return kindOption(session.WatchChildren) }

// Exists makes Watch report the node's creation and deletion.
func Exists() WatchOption { return kindOption(session.WatchExists) }

// Locks makes Watch report the lock events of the requests on the path
// (with Recursive, anywhere below it too): EventLockGranted,
// EventLockReleased, EventLockLost and EventLockContended, in revision
// order with the node events. Alone it reports no node events.
func Locks() WatchOption { return kindOption(session.WatchLocks) }

type fromRevOption uint64

func (r fromRevOption) applyWatch(o *watchOptions) { o.fromRev = uint64(r) }

// FromRevision makes Watch deliver events with a revision above rev first
// (those already committed), then live ones. Pass the revision a read
// returned to miss nothing that happened after it. Without it the watch
// starts at the moment it is established. When the server no longer holds
// that history the first event is a Resync.
func FromRevision(rev uint64) WatchOption { return fromRevOption(rev) }

type oneShotOption struct{}

func (oneShotOption) applyWatch(o *watchOptions) { o.oneShot = true }

// OneShot ends the watch after its first event.
func OneShot() WatchOption { return oneShotOption{} }

func buildCreate(opts []CreateOption) createOptions {
	var o createOptions
	for _, opt := range opts {
		opt.applyCreate(&o)
	}
	return o
}

func buildRead(opts []ReadOption) readOptions {
	var o readOptions
	for _, opt := range opts {
		opt.applyRead(&o)
	}
	return o
}

func buildChildren(opts []ChildrenOption) childrenOptions {
	var o childrenOptions
	for _, opt := range opts {
		opt.applyChildren(&o)
	}
	return o
}

func buildSet(opts []SetOption) (setOptions, error) {
	o := setOptions{version: namespace.AnyVersion}
	for _, opt := range opts {
		opt.applySet(&o)
	}
	return o, checkVersion(o.version)
}

func buildDelete(opts []DeleteOption) (deleteOptions, error) {
	o := deleteOptions{version: namespace.AnyVersion}
	for _, opt := range opts {
		opt.applyDelete(&o)
	}
	return o, checkVersion(o.version)
}

func checkVersion(v int64) error {
	if v < namespace.AnyVersion {
		return fmt.Errorf("%w: WithVersion(%d): versions are never negative", ErrBadOption, v)
	}
	return nil
}

func buildWatch(opts []WatchOption) watchOptions {
	var o watchOptions
	for _, opt := range opts {
		opt.applyWatch(&o)
	}
	if o.kind == 0 {
		// A watch that names nothing follows the node itself: created,
		// changed, deleted — what watching a key means in etcd.
		o.kind = session.WatchData | session.WatchExists
	}
	return o
}
