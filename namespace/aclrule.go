package namespace

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
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
	return QuoteIdentity(r.Identity) + " " + r.Prefix + " " + r.Perms.String()
}

// QuoteIdentity writes an identity as ParseRules reads it: quoted when it
// is empty or holds a space, a quote or a #.
func QuoteIdentity(id string) string {
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
