package session

import (
	"fmt"
	"strings"
)

// CellOf returns the cell a path belongs to: its first component ("a" for
// "/a" and "/a/x/y"), or "" for the root "/" and for anything that is not
// an absolute path. In a deployment of cells (latchd --cell NAME) the
// cell NAME serves /NAME and everything below it, and nothing else.
func CellOf(p string) string {
	if !strings.HasPrefix(p, "/") {
		return ""
	}
	c, _, _ := strings.Cut(p[1:], "/")
	return c
}

// InCell reports whether path p belongs to cell (p is /cell or below it).
func InCell(p, cell string) bool { return cell != "" && CellOf(p) == cell }

// WrongCell is the error a member of cell serving answers for path p of
// another cell: it names the cell p belongs to (or says that p belongs to
// no cell, for "/"), and keeps its identity across the wire (ErrWrongCell).
func WrongCell(p, serving string) error {
	if c := CellOf(p); c != "" {
		return fmt.Errorf("%w: %s belongs to cell %q; this member serves cell %q (/%s/...): send it to cell %q's members",
			ErrWrongCell, p, c, serving, serving, c)
	}
	return fmt.Errorf("%w: %s belongs to no cell; this member serves cell %q: use a path under /%s/",
		ErrWrongCell, p, serving, serving)
}
