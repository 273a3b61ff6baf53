package namespace

import (
	"fmt"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/go-msgpack/v2/codec"
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

// OpSetLimits replaces the cluster settings with Command.Limits. When
// Command.Version is not AnyVersion it must equal the revision of the
// settings in force (0: never set through the log), or the command fails
// with ErrBadVersion: the first leader bootstraps with Version 0, so of two
// racing bootstraps only the first takes effect, and an operator's
// read-modify-write cannot undo a change it did not see.
const OpSetLimits Op = 15

// metaLimits holds the limitsRecord of the settings in force.
var metaLimits = []byte{spaceMeta, 'l', 'i', 'm', 'i', 't', 's'}

// limitsRecord is how the settings are stored: msgpack with named fields,
// decoded over DefaultLimits, so a setting added later reads as its
// default in a record written before it existed.
type limitsRecord struct {
	Rev    uint64 `codec:"rev"`
	Limits Limits `codec:"lim"`
}

// LimitsRevision is the revision (raft index) of the command that set the
// settings in force, 0 when no command has set them.
func (s *Store) LimitsRevision() uint64 { return s.limits.Load().rev }

// setLimits applies OpSetLimits.
func (c *cmdCtx) setLimits(cmd *Command) error {
	if cmd.Limits == nil {
		return fmt.Errorf("%w: set-limits needs limits", ErrBadCommand)
	}
	l := *cmd.Limits
	if err := l.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadCommand, err)
	}
	cur := c.limitsInForce()
	if cmd.Version != AnyVersion && uint64(cmd.Version) != cur.rev {
		return fmt.Errorf("%w: settings revision is %d, not %d", ErrBadVersion, cur.rev, cmd.Version)
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
	Limits
	rev uint64
}

// limitsInForce returns the settings the current command runs under.
func (c *cmdCtx) limitsInForce() *limitsInForce { return c.b.limits }

// limits returns the limits the current command runs under.
func (c *cmdCtx) limits() Limits { return c.b.limits.Limits }

func encodeLimitsRecord(r *limitsRecord) ([]byte, error) {
	var b []byte
	if err := codec.NewEncoderBytes(&b, entryHandle).Encode(r); err != nil {
		return nil, fmt.Errorf("latch: encode limits: %w", err)
	}
	return b, nil
}

func decodeLimitsRecord(v []byte) (*limitsRecord, error) {
	r := &limitsRecord{Limits: DefaultLimits()}
	if err := codec.NewDecoderBytes(v, entryHandle).Decode(r); err != nil {
		return nil, fmt.Errorf("%w: limits record: %v", ErrStorage, err)
	}
	if err := r.Limits.Validate(); err != nil {
		return nil, fmt.Errorf("%w: limits record: %v", ErrStorage, err)
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
		return fmt.Errorf("%w: read limits: %w", ErrStorage, err)
	}
	s.limits.Store(in)
	return nil
}
