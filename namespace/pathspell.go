package namespace

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// checkSpelling refuses names that could look like another name: one
// name, one spelling. p is valid UTF-8 with no control characters. The
// reason names the rule (see "Paths" in doc.go):
//   - invisible code points: format characters (Cf: zero-width space and
//     joiners, bidi controls such as RLO, the byte-order mark, soft
//     hyphen), the other default-ignorable code points (Hangul fillers,
//     combining grapheme joiner) and variation selectors;
//   - not in Unicode NFC: /é written as e + U+0301 is refused, not stored
//     as a second /é;
//   - a component mixing letters of two of Latin, Greek and Cyrillic (the
//     scripts whose letters look alike: "pаypal" with a Cyrillic а).
//
// ASCII paths, the common case, pass at the cost of one scan.
func checkSpelling(p string) string {
	i := 0
	for i < len(p) && p[i] < utf8.RuneSelf {
		i++
	}
	if i == len(p) {
		return ""
	}
	for _, r := range p[i:] {
		if why := invisible(r); why != "" {
			return fmt.Sprintf("%s %U: invisible code points are refused, so that two names that look the same are the same name", why, r)
		}
	}
	if !norm.NFC.IsNormalString(p) {
		return "not in Unicode NFC (compose it first, e.g. norm.NFC.String): each name has one spelling"
	}
	for start := 1; start < len(p); {
		end := start
		for end < len(p) && p[end] != '/' {
			end++
		}
		if a, b := mixedScripts(p[start:end]); a != "" {
			return fmt.Sprintf("component %+q mixes %s and %s letters: a name may use one of Latin, Greek and Cyrillic, whose letters look alike", p[start:end], a, b)
		}
		start = end + 1
	}
	return ""
}

// invisible names the kind of r when paths refuse it, else "".
func invisible(r rune) string {
	switch {
	case r == 0xFEFF:
		return "byte-order mark"
	case r == 0x061C || r == 0x200E || r == 0x200F || (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069):
		return "bidi control"
	case unicode.Is(unicode.Cf, r):
		return "format character"
	case unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r), unicode.Is(unicode.Variation_Selector, r):
		return "default-ignorable code point"
	}
	return ""
}

// confusableScripts are the scripts a component may not mix: their
// letters look alike (Latin a, Cyrillic а, Greek α-like ο). Any of them
// with Han, Kana, Hangul, Arabic or any other script is fine ("東京-tokyo"),
// as are digits, punctuation and marks (script Common or Inherited).
var confusableScripts = []struct {
	name  string
	table *unicode.RangeTable
}{
	{"Latin", unicode.Latin},
	{"Greek", unicode.Greek},
	{"Cyrillic", unicode.Cyrillic},
}

// mixedScripts returns the first two confusable scripts whose letters
// name holds, or "", "".
func mixedScripts(name string) (string, string) {
	seen := -1
	for _, r := range name {
		if !unicode.IsLetter(r) {
			continue
		}
		for i, s := range confusableScripts {
			if !unicode.Is(s.table, r) {
				continue
			}
			switch {
			case seen < 0:
				seen = i
			case seen != i:
				return confusableScripts[seen].name, s.name
			}
			break
		}
	}
	return "", ""
}
