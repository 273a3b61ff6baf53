package store

import (
	"fmt"
	"strconv"

	"github.com/latch-io/latch/namespace"
)

// seqDigits is the width of a sequential suffix.
const seqDigits = 10

// create is OpCreate: a client's create, refused for reserved names.
func (c *cmdCtx) create(cmd *namespace.Command, r *namespace.Result) error {
	return c.createNode(cmd, r, false)
}

// createNode creates cmd.Path; lockOwn lets the lock code create its
// request nodes, whose names are reserved for it. The ACL check is on the
// final path.
func (c *cmdCtx) createNode(cmd *namespace.Command, r *namespace.Result, lockOwn bool) error {
	l := c.limits()
	if cmd.Flags&^(namespace.FlagEphemeral|namespace.FlagSequential) != 0 {
		return fmt.Errorf("%w: unknown create flags %#x", namespace.ErrBadCommand, uint8(cmd.Flags))
	}
	seq := cmd.Flags&namespace.FlagSequential != 0
	p := cmd.Path
	if seq {
		// A sequential path may end in "/": the suffix is the whole name.
		if err := namespace.ValidatePath(p+"0000000000", l); err != nil {
			return err
		}
	} else if err := namespace.ValidatePath(p, l); err != nil {
		return err
	}
	if len(cmd.Data) > l.MaxDataBytes {
		return fmt.Errorf("%w: %d bytes > %d", namespace.ErrDataTooLarge, len(cmd.Data), l.MaxDataBytes)
	}
	if p == "/" {
		return fmt.Errorf("%w: /", namespace.ErrNodeExists)
	}
	parentPath := namespace.Parent(p)
	parent, err := c.node(parentPath)
	if err != nil {
		return err
	}
	if parent == nil {
		return fmt.Errorf("%w: parent %s of %s", namespace.ErrNoNode, parentPath, p)
	}
	if parent.stat.EphemeralOwner != 0 {
		return fmt.Errorf("%w: %s", namespace.ErrEphemeralParent, parentPath)
	}
	var owner uint64
	if cmd.Flags&namespace.FlagEphemeral != 0 {
		if _, ok, err := c.getRaw(sessionKey(cmd.Session)); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("%w: %d", namespace.ErrNoSession, cmd.Session)
		}
		owner = cmd.Session
	}
	if seq {
		p = seqPath(p, parent.seq)
		if err := namespace.ValidatePath(p, l); err != nil { // the counter outgrew ten digits
			return err
		}
	}
	if t := c.b.acl; t.enforced {
		if !lockOwn && isReservedName(namespace.Base(p)) {
			return reservedError(p)
		}
		if err := t.check(c.identity, p, namespace.PermCreate); err != nil {
			return err
		}
		if err := c.checkCellMap(p); err != nil {
			return err
		}
	}
	if existing, err := c.node(p); err != nil {
		return err
	} else if existing != nil {
		return fmt.Errorf("%w: %s", namespace.ErrNodeExists, p)
	}
	n := &node{
		stat: namespace.Stat{
			CreateRev:      c.index,
			ModRev:         c.index,
			Ctime:          c.now,
			Mtime:          c.now,
			EphemeralOwner: owner,
			DataLength:     int32(len(cmd.Data)),
		},
		data: cmd.Data,
	}
	c.putNode(p, n)
	if owner != 0 {
		c.putRaw(ephemeralKey(owner, p), nil)
	}
	if seq {
		parent.seq++
	}
	parent.stat.CVersion++
	parent.stat.NumChildren++
	c.putNode(parentPath, parent)
	c.emit(namespace.EventCreated, p, owner)
	c.emit(namespace.EventChildrenChanged, parentPath, 0)
	r.Path, r.Stat = p, n.stat
	return nil
}

func seqPath(prefix string, n int64) string {
	b := make([]byte, 0, len(prefix)+seqDigits)
	b = append(b, prefix...)
	digits := strconv.AppendInt(nil, n, 10)
	for i := len(digits); i < seqDigits; i++ {
		b = append(b, '0')
	}
	return string(append(b, digits...))
}

// existing returns the node at a validated path that must exist and match
// version.
func (c *cmdCtx) existing(p string, version int64) (*node, error) {
	if err := namespace.ValidatePath(p, c.limits()); err != nil {
		return nil, err
	}
	n, err := c.node(p)
	if err != nil {
		return nil, err
	}
	if n == nil {
		return nil, fmt.Errorf("%w: %s", namespace.ErrNoNode, p)
	}
	if version != namespace.AnyVersion && version != n.stat.Version {
		return nil, fmt.Errorf("%w: %s is at version %d, not %d", namespace.ErrBadVersion, p, n.stat.Version, version)
	}
	return n, nil
}

func (c *cmdCtx) set(cmd *namespace.Command, r *namespace.Result) error {
	if len(cmd.Data) > c.limits().MaxDataBytes {
		return fmt.Errorf("%w: %d bytes > %d", namespace.ErrDataTooLarge, len(cmd.Data), c.limits().MaxDataBytes)
	}
	if err := c.authorize(cmd.Path, namespace.PermWrite); err != nil {
		return err
	}
	if err := c.checkCellMap(cmd.Path); err != nil {
		return err
	}
	n, err := c.existing(cmd.Path, cmd.Version)
	if err != nil {
		return err
	}
	if _, err := c.checkOwner(cmd, cmd.Path, n, "change"); err != nil {
		return err
	}
	n.data = cmd.Data
	n.stat.Version++
	n.stat.ModRev = c.index
	n.stat.Mtime = c.now
	n.stat.DataLength = int32(len(cmd.Data))
	c.putNode(cmd.Path, n)
	c.emit(namespace.EventDataChanged, cmd.Path, n.stat.EphemeralOwner)
	r.Stat = n.stat
	return nil
}

func (c *cmdCtx) delete(cmd *namespace.Command) error {
	if cmd.Path == "/" {
		return fmt.Errorf("%w", namespace.ErrRootImmutable)
	}
	if err := c.authorize(cmd.Path, namespace.PermDelete); err != nil {
		return err
	}
	if err := c.checkCellMap(cmd.Path); err != nil {
		return err
	}
	n, err := c.existing(cmd.Path, cmd.Version)
	if err != nil {
		return err
	}
	if n.stat.NumChildren > 0 {
		return fmt.Errorf("%w: %s has %d", namespace.ErrNotEmpty, cmd.Path, n.stat.NumChildren)
	}
	foreign, err := c.checkOwner(cmd, cmd.Path, n, "delete")
	if err != nil {
		return err
	}
	if foreign {
		// An admin removing another session's node: its owner loses it as
		// on expiry (Lost, lock-delay).
		c.lockCause = causeExpire
		defer func() { c.lockCause = causeDelete }()
	}
	return c.removeNode(cmd.Path, n)
}

// authorize checks the command's identity for want on a client-named path
// (validated first, so the error is about the path when it is bad).
func (c *cmdCtx) authorize(p string, want namespace.Perm) error {
	t := c.b.acl
	if !t.enforced {
		return nil
	}
	if err := namespace.ValidatePath(p, c.limits()); err != nil {
		return err
	}
	return t.check(c.identity, p, want)
}

// removeNode deletes a childless node and updates its parent and session.
func (c *cmdCtx) removeNode(p string, n *node) error {
	parentPath := namespace.Parent(p)
	parent, err := c.node(parentPath)
	if err != nil {
		return err
	}
	if parent == nil {
		return fmt.Errorf("%w: parent %s of %s is missing", namespace.ErrStorage, parentPath, p)
	}
	c.deleteNode(p)
	if owner := n.stat.EphemeralOwner; owner != 0 {
		c.deleteRaw(ephemeralKey(owner, p))
	}
	parent.stat.CVersion++
	parent.stat.NumChildren--
	c.putNode(parentPath, parent)
	c.emit(namespace.EventDeleted, p, n.stat.EphemeralOwner)
	c.emit(namespace.EventChildrenChanged, parentPath, 0)
	if n.stat.EphemeralOwner != 0 {
		c.lockNodeRemoved(p)
	}
	return nil
}

func (c *cmdCtx) check(cmd *namespace.Command, r *namespace.Result) error {
	if err := c.authorize(cmd.Path, namespace.PermRead); err != nil {
		return err
	}
	n, err := c.existing(cmd.Path, cmd.Version)
	if err != nil {
		return err
	}
	r.Stat = n.stat
	return nil
}
