package namespace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
)

// SessionInfo is a session as recorded in the namespace.
type SessionInfo struct {
	ID        uint64
	Secret    []byte
	TTLMillis int64
	Identity  string
	// Host is the client's IP address, recorded for clients without a
	// certificate (Identity ""), whose session quota is per host.
	Host     string
	OpenRev  uint64 // index of the OpSessionOpen (= ID)
	OpenTime int64  // leader time of the OpSessionOpen
}

// Session record formats: 2 adds the host after the identity; format 1
// (no host) is still written when there is none, so version 1 states
// stay byte for byte the same.
const (
	sessionFormat     = 1
	sessionFormatHost = 2
)

func appendSession(b []byte, si *SessionInfo) []byte {
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

func decodeSession(id uint64, v []byte) (SessionInfo, error) {
	d := decoder{b: v}
	f := d.byte()
	if f != sessionFormat && f != sessionFormatHost {
		return SessionInfo{}, fmt.Errorf("%w: session %d format %d", ErrStorage, id, f)
	}
	si := SessionInfo{ID: id, OpenRev: id}
	si.TTLMillis = d.varint()
	si.OpenTime = d.varint()
	si.Secret = bytes.Clone(d.bytes())
	si.Identity = string(d.bytes())
	if f == sessionFormatHost {
		si.Host = string(d.bytes())
	}
	if d.err != nil {
		return SessionInfo{}, fmt.Errorf("%w: session %d: %v", ErrStorage, id, d.err)
	}
	return si, nil
}

// maxHostBytes bounds Command.Host: an IPv6 address with a zone fits.
const maxHostBytes = 128

func (c *cmdCtx) openSession(cmd *Command, r *Result) error {
	if cmd.TTLMillis <= 0 {
		return fmt.Errorf("%w: session TTL %dms", ErrBadCommand, cmd.TTLMillis)
	}
	if len(cmd.Host) > maxHostBytes {
		return fmt.Errorf("%w: host longer than %d bytes", ErrBadCommand, maxHostBytes)
	}
	si := SessionInfo{TTLMillis: cmd.TTLMillis, OpenTime: c.now, Secret: cmd.Secret, Identity: cmd.Identity, Host: cmd.Host}
	c.putRaw(sessionKey(c.index), appendSession(nil, &si))
	c.emit(EventSessionOpened, "", c.index)
	r.Session = c.index
	return nil
}

func (c *cmdCtx) closeSession(cmd *Command) error {
	if _, ok, err := c.getRaw(sessionKey(cmd.Session)); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%w: %d", ErrNoSession, cmd.Session)
	}
	return c.endSession(cmd.Session, EventSessionClosed)
}

// expireSessions ends every listed session that still exists. A session
// that is gone already (the leader raced with a close) is skipped and
// reported in its Results entry; the command itself succeeds.
func (c *cmdCtx) expireSessions(cmd *Command, r *Result) error {
	r.Results = make([]Result, len(cmd.Sessions))
	for i, id := range cmd.Sessions {
		r.Results[i] = Result{Index: c.index, Session: id}
		if _, ok, err := c.getRaw(sessionKey(id)); err != nil {
			return err
		} else if !ok {
			r.Results[i].Err = fmt.Errorf("%w: %d", ErrNoSession, id)
			continue
		}
		if err := c.endSession(id, EventSessionExpired); err != nil {
			return err
		}
	}
	return nil
}

// endSession deletes the session's ephemerals, found through its index
// keys, and then the session. It checkpoints when a huge session outgrows
// one transaction (see cmdCtx.checkpoint).
func (c *cmdCtx) endSession(id uint64, ev EventType) error {
	paths, err := c.sessionEphemerals(id)
	if err != nil {
		return err
	}
	c.lockCause = causeClose
	if ev == EventSessionExpired {
		c.lockCause = causeExpire
	}
	defer func() { c.lockCause = causeDelete }()
	for _, p := range paths {
		n, err := c.node(p)
		if err != nil {
			return err
		}
		if n == nil || n.stat.EphemeralOwner != id {
			return fmt.Errorf("%w: session %d indexes %s, which it does not own", ErrStorage, id, p)
		}
		if err := c.removeNode(p, n); err != nil {
			return err
		}
		if err := c.checkpoint(); err != nil {
			return err
		}
	}
	c.deleteRaw(sessionKey(id))
	c.emit(ev, "", id)
	return nil
}

// sessionEphemerals lists a session's ephemeral paths in key order. It reads
// the transaction, not the overlay: no command creates an ephemeral and
// ends its session.
func (c *cmdCtx) sessionEphemerals(id uint64) ([]string, error) {
	prefix := ephemeralPrefix(id)
	it := c.b.txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	var paths []string
	for it.Seek(prefix); it.Valid(); it.Next() {
		paths = append(paths, string(it.Item().Key()[len(prefix):]))
	}
	return paths, nil
}

// Session returns the session id, or an error wrapping ErrNoSession.
func (s *Store) Session(id uint64) (SessionInfo, error) {
	var si SessionInfo
	err := s.view(func(txn *badger.Txn) error {
		item, err := txn.Get(sessionKey(id))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return fmt.Errorf("%w: %d", ErrNoSession, id)
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
func (s *Store) Sessions() ([]SessionInfo, error) {
	var out []SessionInfo
	err := s.view(func(txn *badger.Txn) error {
		return scan(txn, []byte{spaceSession}, func(k, v []byte) error {
			if len(k) != 9 {
				return fmt.Errorf("%w: session key %q", ErrStorage, k)
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
