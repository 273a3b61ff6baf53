package namespace

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ValidatePath reports whether p is a well-formed absolute path within l.
// The error wraps ErrBadPath and names the reason.
func ValidatePath(p string, l Limits) error {
	bad := func(reason string) error {
		return fmt.Errorf("%w: %q: %s", ErrBadPath, p, reason)
	}
	if p == "" {
		return bad("empty")
	}
	if p[0] != '/' {
		return bad("not absolute")
	}
	if len(p) > l.MaxPathBytes {
		return bad(fmt.Sprintf("longer than %d bytes", l.MaxPathBytes))
	}
	if p == "/" {
		return nil
	}
	if !utf8.ValidString(p) {
		return bad("invalid UTF-8")
	}
	for _, r := range p {
		// unicode.IsControl covers NUL, C0, DEL and C1: none of them can be
		// typed or printed safely, and NUL is the key separator.
		if unicode.IsControl(r) {
			return bad(fmt.Sprintf("control character %U", r))
		}
	}
	if why := checkSpelling(p); why != "" {
		// %+q: the look-alike must show in the error as what it is.
		return fmt.Errorf("%w: %+q: %s", ErrBadPath, p, why)
	}
	if p[len(p)-1] == '/' {
		return bad("trailing slash")
	}
	depth := 0
	for comp := range strings.SplitSeq(p[1:], "/") {
		depth++
		switch comp {
		case "":
			return bad("empty component")
		case ".", "..":
			return bad("relative component " + comp)
		}
	}
	if depth > l.MaxDepth {
		return bad(fmt.Sprintf("deeper than %d", l.MaxDepth))
	}
	return nil
}

// Parent returns the parent of a valid path; the parent of "/" is "/".
func Parent(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// Base returns the last component of a valid path; the base of "/" is "".
func Base(p string) string {
	return p[strings.LastIndexByte(p, '/')+1:]
}

// Join returns the path of child name under parent.
func Join(parent, name string) string {
	if parent == "/" {
		return "/" + name
	}
	return parent + "/" + name
}
