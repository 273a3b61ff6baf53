package store

import (
	"fmt"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/namespace/varint"
)

// memberFormat 2 added APIAddr; records of format 1 still decode.
const memberFormat = 2

func appendMember(b []byte, m *namespace.Member) []byte {
	b = append(b, memberFormat)
	b = appendString(b, m.RaftAddr)
	b = appendString(b, m.ClientAddr)
	b = appendString(b, m.HTTPAddr)
	return appendString(b, m.APIAddr)
}

func decodeMember(id string, v []byte) (namespace.Member, error) {
	d := varint.NewDecoder(v)
	f := d.Byte()
	if f != 1 && f != memberFormat {
		return namespace.Member{}, fmt.Errorf("%w: member %q format %d", namespace.ErrStorage, id, f)
	}
	m := namespace.Member{ID: id, RaftAddr: string(d.Bytes()), ClientAddr: string(d.Bytes()), HTTPAddr: string(d.Bytes())}
	if f >= 2 {
		m.APIAddr = string(d.Bytes())
	}
	if err := d.Err(); err != nil {
		return namespace.Member{}, fmt.Errorf("%w: member %q: %v", namespace.ErrStorage, id, err)
	}
	return m, nil
}

func (c *cmdCtx) setMember(cmd *namespace.Command) error {
	if cmd.Member == nil || cmd.Member.ID == "" {
		return fmt.Errorf("%w: set-member needs a member with an ID", namespace.ErrBadCommand)
	}
	c.putRaw(memberKey(cmd.Member.ID), appendMember(nil, cmd.Member))
	return nil
}

func (c *cmdCtx) removeMember(cmd *namespace.Command) error {
	if cmd.Member == nil || cmd.Member.ID == "" {
		return fmt.Errorf("%w: remove-member needs a member ID", namespace.ErrBadCommand)
	}
	key := memberKey(cmd.Member.ID)
	if _, ok, err := c.getRaw(key); err != nil {
		return err
	} else if !ok {
		return fmt.Errorf("%w: %q", namespace.ErrNoMember, cmd.Member.ID)
	}
	c.deleteRaw(key)
	return nil
}

// Members returns the recorded cluster members ordered by ID.
func (s *Store) Members() ([]namespace.Member, error) {
	var out []namespace.Member
	err := s.view(func(txn *badger.Txn) error {
		return scan(txn, []byte{spaceMember}, func(k, v []byte) error {
			m, err := decodeMember(string(k[1:]), v)
			out = append(out, m)
			return err
		})
	})
	return out, err
}
