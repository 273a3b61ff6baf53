package store

import (
	"encoding/binary"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/namespace/msgp"
)

// Lock history: every grant and every end of a held lock (release, cancel,
// session closed, session expired, hold TTL ran out, node deleted — by an
// admin or any owner of the right) is one record in replicated state, for
// post-mortems of "who held this lock with which token, and why did it
// end". Records are keys 'h' seq(8, big endian), seq counting up from 0;
// the window is [head, tail) in meta. It is bounded by two cluster
// settings, Limits.LockHistoryMax (records) and
// Limits.LockHistoryMaxAgeMillis (age by leader time, 0: no age bound);
// Apply trims the oldest records past either bound, at most
// historyTrimBatch per command, so lowering a bound costs a few commands,
// never one huge one. Everything comes from the log: the times are leader
// times, the identity is the session's.

const spaceHistory = 'h'

var (
	metaHistoryHead = []byte{spaceMeta, 'h', 'h', 'e', 'a', 'd'}
	metaHistoryTail = []byte{spaceMeta, 'h', 't', 'a', 'i', 'l'}
)

// historyTrimBatch bounds the records one command deletes.
const historyTrimBatch = 256

func historyKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{spaceHistory}, seq)
}

var lockEndNames = map[lockCause]string{
	causeDelete:  "deleted",
	causeRelease: "released",
	causeCancel:  "canceled",
	causeClose:   "session-closed",
	causeExpire:  "session-expired",
	causeHoldTTL: "hold-ttl-expired",
}

// historyCounter reads a window bound from meta (0 when unset).
func (c *cmdCtx) historyCounter(key []byte) (uint64, error) {
	v, ok, err := c.getRaw(key)
	if err != nil || !ok {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: history counter %q is %d bytes", namespace.ErrStorage, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// recordLock appends one event for request q to the history and trims the
// window. Storage errors stop the command like any other.
func (c *cmdCtx) recordLock(q *lockReq, event string) error {
	lim := c.limits()
	if lim.LockHistoryMax <= 0 {
		return c.trimHistory()
	}
	tail, err := c.historyCounter(metaHistoryTail)
	if err != nil {
		return err
	}
	ev := namespace.LockEvent{
		Seq: tail, Rev: c.index, Event: event, Path: q.lockPath(), Node: q.node, Mode: q.mode,
		Token: q.token, Session: q.session, Time: c.now, GrantTime: q.grantTime,
	}
	if event == "deleted" {
		ev.By = c.identity
	}
	if v, ok, err := c.getRaw(sessionKey(q.session)); err != nil {
		return err
	} else if ok {
		if si, err := decodeSession(q.session, v); err == nil {
			ev.Identity = si.Identity
		}
	}
	c.putRaw(historyKey(tail), appendLockEvent(c.b.carve(lockEventSize(&ev)), &ev))
	c.putRaw(metaHistoryTail, binary.BigEndian.AppendUint64(nil, tail+1))
	return c.trimHistory()
}

// trimHistory deletes the oldest records past the window's bounds.
func (c *cmdCtx) trimHistory() error {
	head, err := c.historyCounter(metaHistoryHead)
	if err != nil {
		return err
	}
	tail, err := c.historyCounter(metaHistoryTail)
	if err != nil || head == tail {
		return err
	}
	lim := c.limits()
	start := head
	for n := 0; head < tail && n < historyTrimBatch; n++ {
		over := int64(tail-head) > int64(max(lim.LockHistoryMax, 0))
		if !over && lim.LockHistoryMaxAgeMillis > 0 {
			ev, err := c.historyAt(head)
			if err != nil {
				return err
			}
			over = ev.Time < c.now-lim.LockHistoryMaxAgeMillis*1e6
		}
		if !over {
			break
		}
		c.deleteRaw(historyKey(head))
		head++
	}
	if head != start {
		c.putRaw(metaHistoryHead, binary.BigEndian.AppendUint64(nil, head))
	}
	return nil
}

func (c *cmdCtx) historyAt(seq uint64) (namespace.LockEvent, error) {
	var ev namespace.LockEvent
	v, ok, err := c.getRaw(historyKey(seq))
	if err != nil {
		return ev, err
	}
	if !ok {
		return ev, fmt.Errorf("%w: lock history record %d missing inside the window", namespace.ErrStorage, seq)
	}
	return ev, decodeLockEvent(v, &ev)
}

func decodeLockEvent(v []byte, ev *namespace.LockEvent) error {
	if err := codec.NewDecoderBytes(v, namespace.EntryHandle()).Decode(ev); err != nil {
		return fmt.Errorf("%w: decode lock history: %w", namespace.ErrStorage, err)
	}
	return nil
}

// LockHistory returns the recorded grants and ends of locks on path, newest
// first, at most limit (0: no limit). With subtree, locks below path count
// too. It reads the whole window, which the settings bound.
func (s *Store) LockHistory(path string, subtree bool, limit int) ([]namespace.LockEvent, error) {
	if err := namespace.ValidatePath(path, s.Limits()); err != nil {
		return nil, err
	}
	var out []namespace.LockEvent
	err := s.view(func(txn *badger.Txn) error {
		opts := badger.IteratorOptions{Prefix: []byte{spaceHistory}, Reverse: true, PrefetchValues: false}
		it := txn.NewIterator(opts)
		defer it.Close()
		for it.Seek(historyKey(^uint64(0))); it.Valid(); it.Next() {
			var ev namespace.LockEvent
			err := itemValue(it.Item(), func(v []byte) error { return decodeLockEvent(v, &ev) })
			if err != nil {
				return err
			}
			if ev.Path != path && !(subtree && isBelow(ev.Path, path)) {
				continue
			}
			out = append(out, ev)
			if limit > 0 && len(out) == limit {
				break
			}
		}
		return nil
	})
	return out, err
}

// isBelow reports whether p is a strict descendant of parent.
func isBelow(p, parent string) bool {
	if parent == "/" {
		return p != "/"
	}
	return len(p) > len(parent) && p[len(parent)] == '/' && p[:len(parent)] == parent
}

// appendLockEvent appends the record of ev: the bytes EntryHandle()'s
// reflection encoder writes (a map of the fields in sorted tag order, i
// and b omitted when empty), by hand, as every member writes one or two
// per lock cycle (TestLockEventCodec compares the two).
func appendLockEvent(b []byte, ev *namespace.LockEvent) []byte {
	n := 10
	if ev.Identity != "" {
		n++
	}
	if ev.By != "" {
		n++
	}
	b = msgp.AppendMapLen(b, n)
	if ev.By != "" {
		b = msgp.AppendStr(msgp.AppendKey(b, "b"), ev.By)
	}
	b = msgp.AppendStr(msgp.AppendKey(b, "e"), ev.Event)
	b = msgp.AppendInt(msgp.AppendKey(b, "gt"), ev.GrantTime)
	if ev.Identity != "" {
		b = msgp.AppendStr(msgp.AppendKey(b, "i"), ev.Identity)
	}
	b = msgp.AppendUint(msgp.AppendKey(b, "m"), uint64(ev.Mode))
	b = msgp.AppendStr(msgp.AppendKey(b, "n"), ev.Node)
	b = msgp.AppendStr(msgp.AppendKey(b, "p"), ev.Path)
	b = msgp.AppendUint(msgp.AppendKey(b, "q"), ev.Seq)
	b = msgp.AppendUint(msgp.AppendKey(b, "r"), ev.Rev)
	b = msgp.AppendUint(msgp.AppendKey(b, "s"), ev.Session)
	b = msgp.AppendUint(msgp.AppendKey(b, "t"), ev.Token)
	return msgp.AppendInt(msgp.AppendKey(b, "tm"), ev.Time)
}

// lockEventSize is len(appendLockEvent(nil, ev)).
func lockEventSize(ev *namespace.LockEvent) int {
	n := 1 + // map header: at most 12 fields
		2 + msgp.StrSize(len(ev.Event)) + 3 + msgp.IntSize(ev.GrantTime) +
		2 + msgp.UintSize(uint64(ev.Mode)) + 2 + msgp.StrSize(len(ev.Node)) + 2 + msgp.StrSize(len(ev.Path)) +
		2 + msgp.UintSize(ev.Seq) + 2 + msgp.UintSize(ev.Rev) + 2 + msgp.UintSize(ev.Session) +
		2 + msgp.UintSize(ev.Token) + 3 + msgp.IntSize(ev.Time)
	if ev.By != "" {
		n += 2 + msgp.StrSize(len(ev.By))
	}
	if ev.Identity != "" {
		n += 2 + msgp.StrSize(len(ev.Identity))
	}
	return n
}
