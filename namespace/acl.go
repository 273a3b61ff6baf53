package namespace

import (
	"bufio"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	badger "github.com/dgraph-io/badger/v4"
)

// Perm is a set of rights on a subtree of the namespace.
type Perm uint8

// Rights. Admin includes every other right, and adds: changing rules on
// the subtree, and deleting or changing nodes owned by other sessions
// (which then behaves as their owner's expiry would).
const (
	PermRead   Perm = 1 << iota // get, stat, exists, children, watch, check
	PermWrite                   // set data
	PermCreate                  // create nodes, request locks
	PermDelete                  // delete nodes
	PermAdmin

	PermNone Perm = 0
	PermRWCD      = PermRead | PermWrite | PermCreate | PermDelete
	PermAll       = PermRWCD | PermAdmin
)

const permLetters = "rwcda"

// String writes p as letters in rwcda order ("rw", "rwcda"), or "none".
func (p Perm) String() string {
	if p == PermNone {
		return "none"
	}
	var b []byte
	for i := range len(permLetters) {
		if p&(1<<i) != 0 {
			b = append(b, permLetters[i])
		}
	}
	if p&^PermAll != 0 {
		b = fmt.Appendf(b, "+%#x", uint8(p&^PermAll))
	}
	return string(b)
}

// ParsePerm reads a right set: letters from "rwcda" in any order, "all"
// (rwcda), "rwcd", or "none" (no rights: a rule that denies).
func ParsePerm(s string) (Perm, error) {
	switch s {
	case "none", "-":
		return PermNone, nil
	case "all":
		return PermAll, nil
	case "":
		return 0, fmt.Errorf("%w: empty rights (use none to deny)", ErrBadRule)
	}
	var p Perm
	for _, r := range s {
		i := strings.IndexRune(permLetters, r)
		if i < 0 {
			return 0, fmt.Errorf("%w: right %q is not one of r, w, c, d, a", ErrBadRule, r)
		}
		p |= 1 << i
	}
	return p, nil
}

// AnyIdentity in ACLRule.Identity makes a rule apply to every identity
// (the empty one of clients without a certificate included) that has no
// matching rule of its own.
const AnyIdentity = "*"

// maxIdentityBytes bounds an identity in a rule; certificate names are far
// shorter.
const maxIdentityBytes = 256

// ACLRule grants Identity the rights Perms on Prefix and every node below
// it. Prefixes match whole path components: a rule on /a covers /a and
// /a/b, not /ab.
type ACLRule struct {
	Identity string `codec:"i"`
	Prefix   string `codec:"p"`
	Perms    Perm   `codec:"r,omitempty"`
}

// String formats the rule the way ParseRules reads it.
func (r ACLRule) String() string {
	return quoteIdentity(r.Identity) + " " + r.Prefix + " " + r.Perms.String()
}

func quoteIdentity(id string) string {
	if id == "" || strings.ContainsFunc(id, func(r rune) bool { return unicode.IsSpace(r) || r == '"' || r == '#' }) {
		return strconv.Quote(id)
	}
	return id
}

// ValidateRule checks a rule's identity and prefix.
func ValidateRule(r ACLRule, l Limits) error {
	if len(r.Identity) > maxIdentityBytes {
		return fmt.Errorf("%w: identity longer than %d bytes", ErrBadRule, maxIdentityBytes)
	}
	if !utf8.ValidString(r.Identity) || strings.ContainsFunc(r.Identity, unicode.IsControl) {
		return fmt.Errorf("%w: identity %q has invalid UTF-8 or control characters", ErrBadRule, r.Identity)
	}
	if err := ValidatePath(r.Prefix, l); err != nil {
		return fmt.Errorf("%w: prefix: %w", ErrBadRule, err)
	}
	if r.Perms&^PermAll != 0 {
		return fmt.Errorf("%w: unknown rights %#x", ErrBadRule, uint8(r.Perms))
	}
	return nil
}

// ParseRules reads rules, one a line: IDENTITY PREFIX RIGHTS. IDENTITY is
// a certificate name, "*" for any identity, or a Go-quoted string (""
// names clients without a certificate); RIGHTS is as ParsePerm reads it.
// Blank lines and lines starting with # are skipped. Errors name the line.
func ParseRules(text string) ([]ACLRule, error) {
	var out []ACLRule
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 64<<10)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		r, err := parseRule(s)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRule, err)
	}
	return out, nil
}

func parseRule(s string) (ACLRule, error) {
	var id string
	if s[0] == '"' {
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return ACLRule{}, fmt.Errorf("%w: bad quoted identity: %v", ErrBadRule, err)
		}
		id, _ = strconv.Unquote(q)
		s = s[len(q):]
		if s != "" && !unicode.IsSpace(rune(s[0])) {
			return ACLRule{}, fmt.Errorf("%w: want space after the quoted identity", ErrBadRule)
		}
	} else {
		i := strings.IndexFunc(s, unicode.IsSpace)
		if i < 0 {
			return ACLRule{}, fmt.Errorf("%w: want IDENTITY PREFIX RIGHTS", ErrBadRule)
		}
		id, s = s[:i], s[i:]
	}
	f := strings.Fields(s)
	if len(f) != 2 {
		return ACLRule{}, fmt.Errorf("%w: want IDENTITY PREFIX RIGHTS", ErrBadRule)
	}
	p, err := ParsePerm(f[1])
	if err != nil {
		return ACLRule{}, err
	}
	r := ACLRule{Identity: id, Prefix: f[0], Perms: p}
	if err := ValidateRule(r, DefaultLimits()); err != nil {
		return ACLRule{}, err
	}
	return r, nil
}

// aclTable is the rules in memory: derived from the 'a' records and the
// ACL meta key, rebuilt by Open and Restore. It is immutable once
// published; a rule change builds a new one.
type aclTable struct {
	enforced bool                       // OpACLBootstrap is in the log
	def      Perm                       // rights of an identity no rule matches
	rules    map[string]map[string]Perm // identity -> prefix -> rights
}

// openTable is the state before OpACLBootstrap: no rules, no ownership,
// no reserved names, exactly what version 1 applied.
var openTable = &aclTable{def: PermRWCD}

// perms returns identity's rights on p: its own most specific rule, else
// the most specific rule for AnyIdentity, else the default. Admin implies
// every right.
func (t *aclTable) perms(identity, p string) Perm {
	r, ok := longest(t.rules[identity], p)
	if !ok {
		r, ok = longest(t.rules[AnyIdentity], p)
	}
	if !ok {
		r = t.def
	}
	if r&PermAdmin != 0 {
		return PermAll
	}
	return r
}

// longest finds the rule with the longest prefix of p: one map lookup per
// ancestor, no allocation.
func longest(rules map[string]Perm, p string) (Perm, bool) {
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
		p = Parent(p)
	}
}

// check fails with ErrPermissionDenied unless identity has want on p.
func (t *aclTable) check(identity, p string, want Perm) error {
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
func (t *aclTable) checkSubtree(identity, p string, want Perm) error {
	if err := t.check(identity, p, want); err != nil {
		return err
	}
	denied := ""
	for _, rules := range []map[string]Perm{t.rules[identity], t.rules[AnyIdentity]} {
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
		ErrPermissionDenied, quoteIdentity(identity), permName(want), denied, p)
}

// within reports whether q is p or lies below it.
func within(q, p string) bool {
	if p == "/" || q == p {
		return true
	}
	return len(q) > len(p) && q[:len(p)] == p && q[len(p)] == '/'
}

func permissionError(identity, p string, want Perm) error {
	return fmt.Errorf("%w: identity %s lacks %s on %s (ask an admin: latch acl set)",
		ErrPermissionDenied, quoteIdentity(identity), permName(want), p)
}

func permName(p Perm) string {
	switch p {
	case PermRead:
		return "read"
	case PermWrite:
		return "write"
	case PermCreate:
		return "create"
	case PermDelete:
		return "delete"
	case PermAdmin:
		return "admin"
	}
	return p.String()
}

// with returns a copy of t with rules set (Perms kept) or removed.
func (t *aclTable) with(set []ACLRule, remove []ACLRule) *aclTable {
	n := &aclTable{enforced: t.enforced, def: t.def, rules: make(map[string]map[string]Perm, len(t.rules)+1)}
	for id, m := range t.rules {
		n.rules[id] = maps.Clone(m)
	}
	for _, r := range set {
		m := n.rules[r.Identity]
		if m == nil {
			m = map[string]Perm{}
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
		if m["/"]&PermAdmin != 0 {
			return true
		}
	}
	return t.def&PermAdmin != 0
}

// list returns the rules sorted by identity, then prefix.
func (t *aclTable) list() []ACLRule {
	var out []ACLRule
	for id, m := range t.rules {
		for p, r := range m {
			out = append(out, ACLRule{Identity: id, Prefix: p, Perms: r})
		}
	}
	slices.SortFunc(out, func(a, b ACLRule) int {
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
	Default  Perm // rights of an identity no rule matches
	Rules    []ACLRule
}

// ACL returns the rules as of the last committed batch.
func (s *Store) ACL() ACL {
	t := s.acl.Load()
	return ACL{Enforced: t.enforced, Default: t.def, Rules: t.list()}
}

// Authorize fails with ErrPermissionDenied unless identity has want on
// path, as of the last committed batch. The server checks reads and
// watches with it; Apply checks writes itself.
func (s *Store) Authorize(identity, path string, want Perm) error {
	return s.acl.Load().check(identity, path, want)
}

// Perms returns identity's rights on path, as of the last committed batch.
func (s *Store) Perms(identity, path string) Perm {
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
	t := &aclTable{rules: map[string]map[string]Perm{}}
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
			return fmt.Errorf("%w: acl meta %x", ErrStorage, v)
		}
		t.enforced, t.def = true, Perm(v[1])
		return scan(txn, []byte{spaceACL}, func(k, v []byte) error {
			i := strings.IndexByte(string(k[1:]), 0)
			if i < 0 || len(v) != 1 {
				return fmt.Errorf("%w: acl record %q", ErrStorage, k)
			}
			id, prefix := string(k[1:1+i]), string(k[2+i:])
			if t.rules[id] == nil {
				t.rules[id] = map[string]Perm{}
			}
			t.rules[id][prefix] = Perm(v[0])
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("%w: load acl: %w", ErrStorage, err)
	}
	s.acl.Store(t)
	return nil
}

// aclBootstrap turns enforcement on with cmd.ACLDefault as the default
// and cmd.ACL as the first rules (the admins named by the server's
// --admins flag). Once enforced it changes nothing and succeeds: every
// new leader proposes it while it sees no rules, and the first one wins.
func (c *cmdCtx) aclBootstrap(cmd *Command) error {
	t := c.b.acl
	if t.enforced {
		return nil
	}
	if cmd.ACLDefault&^PermAll != 0 {
		return fmt.Errorf("%w: unknown default rights %#x", ErrBadRule, uint8(cmd.ACLDefault))
	}
	for _, r := range cmd.ACL {
		if err := ValidateRule(r, c.limits()); err != nil {
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
func (c *cmdCtx) aclChange(cmd *Command, remove bool) error {
	t := c.b.acl
	if !t.enforced {
		return fmt.Errorf("%w: ACLs are not bootstrapped yet (the leader does it when it starts)", ErrBadCommand)
	}
	if len(cmd.ACL) == 0 {
		return fmt.Errorf("%w: no rules", ErrBadRule)
	}
	if len(cmd.ACL) > c.limits().MaxMultiOps {
		return fmt.Errorf("%w: %d rules in one change > %d", ErrTooManyOps, len(cmd.ACL), c.limits().MaxMultiOps)
	}
	for _, r := range cmd.ACL {
		if err := ValidateRule(r, c.limits()); err != nil {
			return err
		}
		if err := t.check(cmd.Identity, r.Prefix, PermAdmin); err != nil {
			return err
		}
		if remove {
			if _, ok := t.rules[r.Identity][r.Prefix]; !ok {
				return fmt.Errorf("%w: no rule for %s on %s", ErrBadRule, quoteIdentity(r.Identity), r.Prefix)
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
		return fmt.Errorf("%w: the change would leave no identity with admin on /", ErrBadRule)
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
	return fmt.Errorf("%w: %s: names lock-x-NNNNNNNNNN and lock-s-NNNNNNNNNN are lock requests (use Lock, not Create)", ErrReservedName, p)
}

// hasReservedComponent reports whether any component of p is reserved.
func hasReservedComponent(p string) bool {
	for p != "/" {
		if isReservedName(Base(p)) {
			return true
		}
		p = Parent(p)
	}
	return false
}

// checkOwner enforces ownership once ACLs are enforced: an ephemeral node
// (a lock request, an election or semaphore node, any ephemeral) may be
// changed or deleted only by its owner session, or by an identity with
// admin on it. It reports whether the caller acts as an admin on another
// session's node.
func (c *cmdCtx) checkOwner(cmd *Command, p string, n *node, what string) (foreign bool, err error) {
	owner := n.stat.EphemeralOwner
	if !c.b.acl.enforced || owner == 0 || owner == cmd.Session {
		return false, nil
	}
	if c.b.acl.perms(c.identity, p)&PermAdmin != 0 {
		return true, nil
	}
	return false, fmt.Errorf("%w: %s belongs to session %d; only that session or an admin may %s it (identity %s, session %d)",
		ErrPermissionDenied, p, owner, what, quoteIdentity(c.identity), cmd.Session)
}
