package store

import (
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/latch-io/latch/namespace"
)

// Cluster settings: every number that shapes what Apply decides lives in
// Limits, and the Limits a store enforces are replicated. OpSetLimits
// carries a complete Limits value through the log; applying it records the
// value (and the revision that set it) in the store, so every member
// enforces the same limits from the same index on, and snapshots carry
// them. Until a command sets them, a store enforces Config.Limits (a
// replicated store leaves that zero, meaning DefaultLimits: a constant of
// the code, the same on every member). doc.go ("Cluster settings") tells
// how to add a setting.

// metaLimits holds the limitsRecord of the settings in force.
var metaLimits = []byte{spaceMeta, 'l', 'i', 'm', 'i', 't', 's'}

// limitsRecord is how the settings are stored: msgpack with named fields,
// decoded over DefaultLimits, so a setting added later reads as its
// default in a record written before it existed.
type limitsRecord struct {
	Rev    uint64           `codec:"rev"`
	Limits namespace.Limits `codec:"lim"`
}

// LimitsRevision is the revision (raft index) of the command that set the
// settings in force, 0 when no command has set them.
func (s *Store) LimitsRevision() uint64 { return s.limits.Load().rev }

// setLimits applies OpSetLimits.
func (c *cmdCtx) setLimits(cmd *namespace.Command) error {
	if cmd.Limits == nil {
		return fmt.Errorf("%w: set-limits needs limits", namespace.ErrBadCommand)
	}
	l := *cmd.Limits
	if err := l.Validate(); err != nil {
		return fmt.Errorf("%w: %w", namespace.ErrBadCommand, err)
	}
	cur := c.limitsInForce()
	if cmd.Version != namespace.AnyVersion && uint64(cmd.Version) != cur.rev {
		return fmt.Errorf("%w: settings revision is %d, not %d", namespace.ErrBadVersion, cur.rev, cmd.Version)
	}
	v, err := encodeLimitsRecord(&limitsRecord{Rev: c.index, Limits: l})
	if err != nil {
		return err
	}
	c.putRaw(metaLimits, v)
	c.newLimits = &limitsInForce{Limits: l, rev: c.index}
	return nil
}

// limitsInForce is the settings a command sees, with their revision.
type limitsInForce struct {
	namespace.Limits
	rev uint64
}

// limitsInForce returns the settings the current command runs under.
func (c *cmdCtx) limitsInForce() *limitsInForce { return c.b.limits }

// limits returns the limits the current command runs under.
func (c *cmdCtx) limits() namespace.Limits { return c.b.limits.Limits }

func encodeLimitsRecord(r *limitsRecord) ([]byte, error) {
	var b []byte
	if err := codec.NewEncoderBytes(&b, namespace.EntryHandle()).Encode(r); err != nil {
		return nil, fmt.Errorf("latch: encode limits: %w", err)
	}
	return b, nil
}

func decodeLimitsRecord(v []byte) (*limitsRecord, error) {
	r := &limitsRecord{Limits: namespace.DefaultLimits()}
	if err := codec.NewDecoderBytes(v, namespace.EntryHandle()).Decode(r); err != nil {
		return nil, fmt.Errorf("%w: limits record: %v", namespace.ErrStorage, err)
	}
	if err := r.Limits.Validate(); err != nil {
		return nil, fmt.Errorf("%w: limits record: %v", namespace.ErrStorage, err)
	}
	return r, nil
}

// loadLimits reads the recorded settings into memory; without a record
// the store enforces its configured initial limits.
func (s *Store) loadLimits() error {
	in := &limitsInForce{Limits: s.initLimits}
	err := s.db.View(func(txn *badger.Txn) error {
		v, ok, err := getValue(txn, metaLimits)
		if err != nil || !ok {
			return err
		}
		r, err := decodeLimitsRecord(v)
		if err != nil {
			return err
		}
		in = &limitsInForce{Limits: r.Limits, rev: r.Rev}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: read limits: %w", namespace.ErrStorage, err)
	}
	s.limits.Store(in)
	return nil
}
