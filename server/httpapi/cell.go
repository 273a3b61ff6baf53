package httpapi

// Cells (server.Config.Cell): a route's {path...} outside this member's
// cell is refused before it is served or forwarded.

import (
	"net/http"
	"strings"

	"github.com/latch-io/latch/session"
)

// apiActions are the last segments of lock and election routes that name
// an action or a view, not a node (splitAction).
var apiActions = map[string]bool{
	"acquire": true, "release": true, "renew": true, "queue": true, "history": true,
	"campaign": true, "proclaim": true, "resign": true, "leader": true, "observe": true,
}

// checkCell refuses an API request whose {path...} lies outside this
// member's cell with the QUIC front's error (HTTP 421), before it is
// served or forwarded. Paths in bodies (multi ops, lock nodes) are checked
// by the QUIC front's cell check on the way to their handler (Conn.Call).
func (a *API) checkCell(r *http.Request, rt apiRoute) error {
	cell := a.cfg.Cell
	if cell == "" || !strings.HasSuffix(rt.pattern, "{path...}") {
		return nil
	}
	p := apiPath(r)
	if strings.HasPrefix(rt.pattern, "/api/v1/locks/") || strings.HasPrefix(rt.pattern, "/api/v1/elections/") {
		p = lockRoutePath(r, rt)
	}
	if session.InCell(p, cell) {
		return nil
	}
	return session.WrongCell(p, cell)
}
