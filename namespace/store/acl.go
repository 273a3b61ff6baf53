package store

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	badger "github.com/dgraph-io/badger/v4"

	"github.com/latch-io/latch/namespace"
)

// ACL meta key, rebuilt by Open and Restore. It is immutable once
// published; a rule change builds a new one.
type aclTable struct {
	enforced bool                                 // OpACLBootstrap is in the log
	def      namespace.Perm                       // rights of an identity no rule matches
	rules    map[string]map[string]namespace.Perm // identity -> prefix -> rights
}

// openTable is the state before OpACLBootstrap: no rules, no ownership,
// no reserved names, exactly what version 1 applied.
var openTable = &aclTable{def: namespace.PermRWCD}

// perms returns identity's rights on p: its own most specific rule, else
// the most specific rule for AnyIdentity, else the default. Admin implies
// every right.
func (t *aclTable) perms(identity, p string) namespace.Perm {
	r, ok := longest(t.rules[identity], p)
	if !ok {
		r, ok = longest(t.rules[namespace.AnyIdentity], p)
	}
	if !ok {
		r = t.def
	}
	if r&namespace.PermAdmin != 0 {
		return namespace.PermAll
	}
	return r
}

// longest finds the rule with the longest prefix of p: one map lookup per
// ancestor, no allocation.
func longest(rules map[string]namespace.Perm, p string) (namespace.Perm, bool) {
	if len(rules) == 0 {
		return 0, false
	}
	for {
		if r, ok := rules[p]; ok {
			return r, true
		}
		if p == "/" {
			return 0, false
		}
		p = namespace.Parent(p)
	}
}

// check fails with ErrPermissionDenied unless identity has want on p.
func (t *aclTable) check(identity, p string, want namespace.Perm) error {
	if t.perms(identity, p)&want == want {
		return nil
	}
	return permissionError(identity, p, want)
}

// checkSubtree fails with ErrPermissionDenied unless identity has want
// on p and on every node below it. A rule of the identity's own, or of
// AnyIdentity, on a prefix below p is the only thing that can make the
// rights inside the subtree differ from those on p (perms takes the most
// specific rule), so checking p and each such prefix covers the subtree
// whatever nodes it holds, or will. The table is small: the cost is one
// pass over the identity's and the wildcard's rules. The prefix named in
// the error is the smallest one refused, so every member writes the same.
func (t *aclTable) checkSubtree(identity, p string, want namespace.Perm) error {
	if err := t.check(identity, p, want); err != nil {
		return err
	}
	denied := ""
	for _, rules := range []map[string]namespace.Perm{t.rules[identity], t.rules[namespace.AnyIdentity]} {
		for q := range rules {
			if q == p || !within(q, p) || t.perms(identity, q)&want == want {
				continue
			}
			if denied == "" || q < denied {
				denied = q
			}
		}
	}
	if denied == "" {
		return nil
	}
	return fmt.Errorf("%w: identity %s lacks %s on %s, which a lock on %s covers (ask an admin: latch acl set)",
		namespace.ErrPermissionDenied, namespace.QuoteIdentity(identity), permName(want), denied, p)
}

// within reports whether q is p or lies below it.
func within(q, p string) bool {
	if p == "/" || q == p {
		return true
	}
	return len(q) > len(p) && q[:len(p)] == p && q[len(p)] == '/'
}

func permissionError(identity, p string, want namespace.Perm) error {
	return fmt.Errorf("%w: identity %s lacks %s on %s (ask an admin: latch acl set)",
		namespace.ErrPermissionDenied, namespace.QuoteIdentity(identity), permName(want), p)
}

func permName(p namespace.Perm) string {
	switch p {
	case namespace.PermRead:
		return "read"
	case namespace.PermWrite:
		return "write"
	case namespace.PermCreate:
		return "create"
	case namespace.PermDelete:
		return "delete"
	case namespace.PermAdmin:
		return "admin"
	}
	return p.String()
}

// with returns a copy of t with rules set (Perms kept) or removed.
func (t *aclTable) with(set []namespace.ACLRule, remove []namespace.ACLRule) *aclTable {
	n := &aclTable{enforced: t.enforced, def: t.def, rules: make(map[string]map[string]namespace.Perm, len(t.rules)+1)}
	for id, m := range t.rules {
		n.rules[id] = maps.Clone(m)
	}
	for _, r := range set {
		m := n.rules[r.Identity]
		if m == nil {
			m = map[string]namespace.Perm{}
			n.rules[r.Identity] = m
		}
		m[r.Prefix] = r.Perms
	}
	for _, r := range remove {
		delete(n.rules[r.Identity], r.Prefix)
		if len(n.rules[r.Identity]) == 0 {
			delete(n.rules, r.Identity)
		}
	}
	return n
}

// hasRootAdmin reports whether some identity is admin of the whole tree.
func (t *aclTable) hasRootAdmin() bool {
	for _, m := range t.rules {
		if m["/"]&namespace.PermAdmin != 0 {
			return true
		}
	}
	return t.def&namespace.PermAdmin != 0
}

// list returns the rules sorted by identity, then prefix.
func (t *aclTable) list() []namespace.ACLRule {
	var out []namespace.ACLRule
	for id, m := range t.rules {
		for p, r := range m {
			out = append(out, namespace.ACLRule{Identity: id, Prefix: p, Perms: r})
		}
	}
	slices.SortFunc(out, func(a, b namespace.ACLRule) int {
		if c := strings.Compare(a.Identity, b.Identity); c != 0 {
			return c
		}
		return strings.Compare(a.Prefix, b.Prefix)
	})
	return out
}

// ACL is the replicated rule set as a reader sees it.
type ACL struct {
	// Enforced: OpACLBootstrap is in the log. Before it, every identity
	// may do everything but admin, and nodes have no owners (version 1).
	Enforced bool
	Default  namespace.Perm // rights of an identity no rule matches
	Rules    []namespace.ACLRule
}

// ACL returns the rules as of the last committed batch.
func (s *Store) ACL() ACL {
	t := s.acl.Load()
	return ACL{Enforced: t.enforced, Default: t.def, Rules: t.list()}
}

// Authorize fails with ErrPermissionDenied unless identity has want on
// path, as of the last committed batch. The server checks reads and
// watches with it; Apply checks writes itself.
func (s *Store) Authorize(identity, path string, want namespace.Perm) error {
	return s.acl.Load().check(identity, path, want)
}

// Perms returns identity's rights on path, as of the last committed batch.
func (s *Store) Perms(identity, path string) namespace.Perm {
	return s.acl.Load().perms(identity, path)
}

// ACL records: 'a' identity 0x00 prefix -> rights (1 byte); the meta key
// 'x' "acl" -> format, default rights. An identity has no NUL
// (ValidateRule), so the key splits at its first NUL.
var metaACL = []byte{spaceMeta, 'a', 'c', 'l'}

const aclFormat = 1

func aclKey(identity, prefix string) []byte {
	k := make([]byte, 0, 2+len(identity)+len(prefix))
	k = append(k, spaceACL)
	k = append(k, identity...)
	k = append(k, 0)
	return append(k, prefix...)
}

// loadACL rebuilds the rule table from badger.
func (s *Store) loadACL() error {
	t := &aclTable{rules: map[string]map[string]namespace.Perm{}}
	err := s.db.View(func(txn *badger.Txn) error {
		v, ok, err := getValue(txn, metaACL)
		if err != nil {
			return err
		}
		if !ok {
			t = openTable
			return nil
		}
		if len(v) != 2 || v[0] != aclFormat {
			return fmt.Errorf("%w: acl meta %x", namespace.ErrStorage, v)
		}
		t.enforced, t.def = true, namespace.Perm(v[1])
		return scan(txn, []byte{spaceACL}, func(k, v []byte) error {
			i := strings.IndexByte(string(k[1:]), 0)
			if i < 0 || len(v) != 1 {
				return fmt.Errorf("%w: acl record %q", namespace.ErrStorage, k)
			}
			id, prefix := string(k[1:1+i]), string(k[2+i:])
			if t.rules[id] == nil {
				t.rules[id] = map[string]namespace.Perm{}
			}
			t.rules[id][prefix] = namespace.Perm(v[0])
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("%w: load acl: %w", namespace.ErrStorage, err)
	}
	s.acl.Store(t)
	return nil
}

// aclBootstrap turns enforcement on with cmd.ACLDefault as the default
// and cmd.ACL as the first rules (the admins named by the server's
// --admins flag). Once enforced it changes nothing and succeeds: every
// new leader proposes it while it sees no rules, and the first one wins.
func (c *cmdCtx) aclBootstrap(cmd *namespace.Command) error {
	t := c.b.acl
	if t.enforced {
		return nil
	}
	if cmd.ACLDefault&^namespace.PermAll != 0 {
		return fmt.Errorf("%w: unknown default rights %#x", namespace.ErrBadRule, uint8(cmd.ACLDefault))
	}
	for _, r := range cmd.ACL {
		if err := namespace.ValidateRule(r, c.limits()); err != nil {
			return err
		}
	}
	n := (&aclTable{enforced: true, def: cmd.ACLDefault}).with(cmd.ACL, nil)
	c.putRaw(metaACL, []byte{aclFormat, byte(cmd.ACLDefault)})
	for _, r := range cmd.ACL {
		c.putRaw(aclKey(r.Identity, r.Prefix), []byte{byte(r.Perms)})
	}
	c.aclNext = n
	return nil
}

// aclChange sets the rules in cmd.ACL (OpACLSet) or removes them
// (OpACLRemove, rights ignored). The caller needs admin on each rule's
// prefix, and the change may not leave the tree without an admin of /.
func (c *cmdCtx) aclChange(cmd *namespace.Command, remove bool) error {
	t := c.b.acl
	if !t.enforced {
		return fmt.Errorf("%w: ACLs are not bootstrapped yet (the leader does it when it starts)", namespace.ErrBadCommand)
	}
	if len(cmd.ACL) == 0 {
		return fmt.Errorf("%w: no rules", namespace.ErrBadRule)
	}
	if len(cmd.ACL) > c.limits().MaxMultiOps {
		return fmt.Errorf("%w: %d rules in one change > %d", namespace.ErrTooManyOps, len(cmd.ACL), c.limits().MaxMultiOps)
	}
	for _, r := range cmd.ACL {
		if err := namespace.ValidateRule(r, c.limits()); err != nil {
			return err
		}
		if err := t.check(cmd.Identity, r.Prefix, namespace.PermAdmin); err != nil {
			return err
		}
		if remove {
			if _, ok := t.rules[r.Identity][r.Prefix]; !ok {
				return fmt.Errorf("%w: no rule for %s on %s", namespace.ErrBadRule, namespace.QuoteIdentity(r.Identity), r.Prefix)
			}
		}
	}
	var n *aclTable
	if remove {
		n = t.with(nil, cmd.ACL)
	} else {
		n = t.with(cmd.ACL, nil)
	}
	if !n.hasRootAdmin() {
		return fmt.Errorf("%w: the change would leave no identity with admin on /", namespace.ErrBadRule)
	}
	for _, r := range cmd.ACL {
		if remove {
			c.deleteRaw(aclKey(r.Identity, r.Prefix))
		} else {
			c.putRaw(aclKey(r.Identity, r.Prefix), []byte{byte(r.Perms)})
		}
	}
	c.aclNext = n
	return nil
}

// Reserved names: the request nodes of locks (lock.go). Nobody may create
// them but the lock code, and no lock path may contain one: a node of that
// name made by hand would collide with a later request's sequential name.
func isReservedName(name string) bool {
	if len(name) != len("lock-x-")+seqDigits || !strings.HasPrefix(name, "lock-") ||
		(name[5] != 'x' && name[5] != 's') || name[6] != '-' {
		return false
	}
	for i := 7; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return false
		}
	}
	return true
}

func reservedError(p string) error {
	return fmt.Errorf("%w: %s: names lock-x-NNNNNNNNNN and lock-s-NNNNNNNNNN are lock requests (use Lock, not Create)", namespace.ErrReservedName, p)
}

// hasReservedComponent reports whether any component of p is reserved.
func hasReservedComponent(p string) bool {
	for p != "/" {
		if isReservedName(namespace.Base(p)) {
			return true
		}
		p = namespace.Parent(p)
	}
	return false
}

// checkOwner enforces ownership once ACLs are enforced: an ephemeral node
// (a lock request, an election or semaphore node, any ephemeral) may be
// changed or deleted only by its owner session, or by an identity with
// admin on it. It reports whether the caller acts as an admin on another
// session's node.
func (c *cmdCtx) checkOwner(cmd *namespace.Command, p string, n *node, what string) (foreign bool, err error) {
	owner := n.stat.EphemeralOwner
	if !c.b.acl.enforced || owner == 0 || owner == cmd.Session {
		return false, nil
	}
	if c.b.acl.perms(c.identity, p)&namespace.PermAdmin != 0 {
		return true, nil
	}
	return false, fmt.Errorf("%w: %s belongs to session %d; only that session or an admin may %s it (identity %s, session %d)",
		namespace.ErrPermissionDenied, p, owner, what, namespace.QuoteIdentity(c.identity), cmd.Session)
}
