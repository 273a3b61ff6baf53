package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/namespace/varint"
)

// Session record formats: 2 adds the host after the identity; format 1
// (no host) is still written when there is none, so version 1 states
// stay byte for byte the same.
const (
	sessionFormat     = 1
	sessionFormatHost = 2
)

func appendSession(b []byte, si *namespace.SessionInfo) []byte {
	f := byte(sessionFormat)
	if si.Host != "" {
		f = sessionFormatHost
	}
	b = append(b, f)
	b = binary.AppendVarint(b, si.TTLMillis)
	b = binary.AppendVarint(b, si.OpenTime)
	b = appendBytes(b, si.Secret)
	b = appendString(b, si.Identity)
	if si.Host != "" {
		b = appendString(b, si.Host)
	}
	return b
}

func decodeSession(id uint64, v []byte) (namespace.SessionInfo, error) {
	d := varint.NewDecoder(v)
	f := d.Byte()
	if f != sessionFormat && f != sessionFormatHost {
		return namespace.SessionInfo{}, fmt.Errorf("%w: session %d format %d", namespace.ErrStorage, id, f)
	}
	si := namespace.SessionInfo{ID: id, OpenRev: id}
	si.TTLMillis = d.Varint()
	si.OpenTime = d.Varint()
	si.Secret = bytes.Clone(d.Bytes())
	si.Identity = string(d.Bytes())
	if f == sessionFormatHost {
		si.Host = string(d.Bytes())
	}
	if err := d.Err(); err != nil {
		return namespace.SessionInfo{}, fmt.Errorf("%w: session %d: %v", namespace.ErrStorage, id, err)
	}
	return si, nil
}

// maxHostBytes bounds Command.Host: an IPv6 address with a zone fits.
const maxHostBytes = 128

func (c *cmdCtx) openSession(cmd *namespace.Command, r *namespace.Result) error {
	if cmd.TTLMillis <= 0 {
		return fmt.Errorf("%w: session TTL %dms", namespace.ErrBadCommand, cmd.TTLMillis)
	}
	if len(cmd.Host) > maxHostBytes {
		return fmt.Errorf("%w: host longer than %d bytes", namespace.ErrBadCommand, maxHostBytes)
	}
	si := namespace.SessionInfo{TTLMillis: cmd.TTLMillis, OpenTime: c.now, Secret: cmd.Secret, Identity: cmd.Identity, Host: cmd.Host}
	c.putRaw(sessionKey(c.index), appendSession(nil, &si))
	c.emit(namespace.EventSessionOpened, "", c.index)
	r.Session = c.index
	return nil
}

func (c *cmdCtx) closeSession(cmd *namespace.Command) error {
	if _, ok, err := c.getRaw(sessionKey(cmd.Session)); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%w: %d", namespace.ErrNoSession, cmd.Session)
	}
	return c.endSession(cmd.Session, namespace.EventSessionClosed)
}

// expireSessions ends every listed session that still exists. A session
// that is gone already (the leader raced with a close) is skipped and
// reported in its Results entry; the command itself succeeds.
func (c *cmdCtx) expireSessions(cmd *namespace.Command, r *namespace.Result) error {
	r.Results = make([]namespace.Result, len(cmd.Sessions))
	for i, id := range cmd.Sessions {
		r.Results[i] = namespace.Result{Index: c.index, Session: id}
		if _, ok, err := c.getRaw(sessionKey(id)); err != nil {
			return err
		} else if !ok {
			r.Results[i].Err = fmt.Errorf("%w: %d", namespace.ErrNoSession, id)
			continue
		}
		if err := c.endSession(id, namespace.EventSessionExpired); err != nil {
			return err
		}
	}
	return nil
}

// Ending a session is bounded work per command. endSession ends the
// session at once (its record goes, so no request names it again, and its
// session event goes out) and deletes at most MaxLockBatch of its
// ephemeral nodes, in key order, with the command's remaining budget. A
// session with nodes left is recorded as ending (endingKey, with why it
// ended); NextTimer then asks for a tick at once, and every tick
// (OpNoop) deletes the next MaxLockBatch nodes of the ending sessions, in
// id order, until none is left. Watchers see the session event after the
// first chunk's Deleted events and the rest of the Deleted events after it,
// each in key order. The nodes of an ending session lose their locks as
// they go: on a close released, on an expiry a phantom with its
// lock-delay from the tick that deletes it; a sequencer of an ending
// session no longer checks as held (CheckSequencer).

// endingKey records a session that ended with nodes left: spaceMeta "end"
// id(8) -> the lockCause of its end (close or expire).
func endingKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), endingPrefix...), id)
}

var endingPrefix = []byte{spaceMeta, 'e', 'n', 'd'}

// endSession ends session id: see above. It checkpoints when a huge
// chunk outgrows one transaction (see cmdCtx.checkpoint).
func (c *cmdCtx) endSession(id uint64, ev namespace.EventType) error {
	cause := causeClose
	if ev == namespace.EventSessionExpired {
		cause = causeExpire
	}
	left, err := c.endEphemerals(id, cause)
	if err != nil {
		return err
	}
	c.deleteRaw(sessionKey(id))
	if left {
		c.putRaw(endingKey(id), []byte{byte(cause)})
		c.setEnding(id, cause, true)
	}
	c.emit(ev, "", id)
	return nil
}

// continueEnding spends a tick's budget on the ending sessions, in id
// order, and forgets each once its last node is gone.
func (c *cmdCtx) continueEnding() error {
	ix := c.locks()
	if len(ix.ending) == 0 {
		return nil
	}
	for _, id := range slices.Sorted(maps.Keys(ix.ending)) {
		if c.endBudget <= 0 {
			break
		}
		left, err := c.endEphemerals(id, ix.ending[id])
		if err != nil {
			return err
		}
		if !left {
			c.deleteRaw(endingKey(id))
			c.setEnding(id, 0, false)
		}
	}
	return nil
}

// setEnding queues a change to the in-memory set of ending sessions; it
// takes effect with the command's lock changes (finishLocks).
func (c *cmdCtx) setEnding(id uint64, cause lockCause, on bool) {
	c.endingOps = append(c.endingOps, endingOp{id: id, cause: cause, on: on})
}

type endingOp struct {
	id    uint64
	cause lockCause
	on    bool
}

// applyEndingOps applies the queued changes to ix.ending; the caller
// holds ix.mu.
func (c *cmdCtx) applyEndingOps(ix *lockIndex) {
	for _, op := range c.endingOps {
		if op.on {
			ix.ending[op.id] = op.cause
		} else {
			delete(ix.ending, op.id)
		}
	}
	c.endingOps = c.endingOps[:0]
}

// endEphemerals deletes up to the command's remaining budget of session
// id's ephemerals, in key order, for cause; left tells whether any remain.
func (c *cmdCtx) endEphemerals(id uint64, cause lockCause) (left bool, err error) {
	paths, left, err := c.sessionEphemerals(id, c.endBudget)
	if err != nil {
		return false, err
	}
	c.lockCause = cause
	defer func() { c.lockCause = causeDelete }()
	for _, p := range paths {
		n, err := c.node(p)
		if err != nil {
			return false, err
		}
		if n == nil || n.stat.EphemeralOwner != id {
			return false, fmt.Errorf("%w: session %d indexes %s, which it does not own", namespace.ErrStorage, id, p)
		}
		if err := c.removeNode(p, n); err != nil {
			return false, err
		}
		c.endBudget--
		if err := c.checkpoint(); err != nil {
			return false, err
		}
	}
	return left, nil
}

// sessionEphemerals lists up to max of a session's ephemeral paths in key
// order, and whether more exist. It reads the transaction and skips what
// the overlay deleted (a hold TTL that ran out in this tick); no command
// creates an ephemeral and ends its session.
func (c *cmdCtx) sessionEphemerals(id uint64, max int) (paths []string, more bool, err error) {
	prefix := ephemeralPrefix(id)
	it := c.b.txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	for it.Seek(prefix); it.Valid(); it.Next() {
		k := it.Item().Key()
		if c.raw[string(k)].deleted {
			continue
		}
		if len(paths) >= max {
			return paths, true, nil
		}
		paths = append(paths, string(k[len(prefix):]))
	}
	return paths, false, nil
}

// Session returns the session id, or an error wrapping ErrNoSession.
func (s *Store) Session(id uint64) (namespace.SessionInfo, error) {
	var si namespace.SessionInfo
	err := s.view(func(txn *badger.Txn) error {
		item, err := txn.Get(sessionKey(id))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return fmt.Errorf("%w: %d", namespace.ErrNoSession, id)
		}
		if err != nil {
			return err
		}
		return itemValue(item, func(v []byte) error {
			si, err = decodeSession(id, v)
			return err
		})
	})
	return si, err
}

// Sessions returns every open session ordered by id.
func (s *Store) Sessions() ([]namespace.SessionInfo, error) {
	var out []namespace.SessionInfo
	err := s.view(func(txn *badger.Txn) error {
		return scan(txn, []byte{spaceSession}, func(k, v []byte) error {
			if len(k) != 9 {
				return fmt.Errorf("%w: session key %q", namespace.ErrStorage, k)
			}
			si, err := decodeSession(binary.BigEndian.Uint64(k[1:]), v)
			out = append(out, si)
			return err
		})
	})
	return out, err
}

// SessionEphemerals returns the paths of a session's ephemeral nodes, sorted.
func (s *Store) SessionEphemerals(id uint64) ([]string, error) {
	var out []string
	err := s.view(func(txn *badger.Txn) error {
		prefix := ephemeralPrefix(id)
		return scan(txn, prefix, func(k, _ []byte) error {
			out = append(out, string(k[len(prefix):]))
			return nil
		})
	})
	return out, err
}
