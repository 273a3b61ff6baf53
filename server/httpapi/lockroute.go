package httpapi

// How GET /api/v1/locks/{path...} names its lock path and its view.
//
// The documented spellings put the view in the last segment:
// .../locks/a/b (the queue of /a/b), .../locks/a/b/queue (the same) and
// .../locks/a/b/history. A lock whose own last component is "queue" or
// "history" cannot be named that way without a suffix: .../locks/a/queue
// is /a's queue. The query parameter view=queue|history removes the
// doubt: with it, every segment of {path...} is the lock path
// (.../locks/a/queue?view=queue is the queue of /a/queue). Without it the
// old reading stands, so existing clients keep working; a client that
// may meet such names sends view always.

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/latch-io/latch/namespace"
)

// lockViewParam is the query parameter that names the view of a lock path.
const lockViewParam = "view"

// lockView reads the lock path and the view ("queue" or "history") of a
// GET /api/v1/locks/{path...} request.
func lockView(r *http.Request) (path, view string, err error) {
	switch v := r.URL.Query().Get(lockViewParam); v {
	case "queue", "history":
		return apiPath(r), v, nil
	case "":
	default:
		return "", "", fmt.Errorf("%w: %s=%q is not queue or history", namespace.ErrBadCommand, lockViewParam, v)
	}
	if p, action, err := splitAction(r, "queue", "history"); err == nil {
		return p, action, nil
	}
	return apiPath(r), "queue", nil
}

// lockRoutePath is the namespace path a lock or election route names
// ({path...} without its action or view segment), for checks made before
// the handler runs (checkCell).
func lockRoutePath(r *http.Request, rt apiRoute) string {
	if rt.method == http.MethodGet && rt.pattern == "/api/v1/locks/{path...}" {
		if p, _, err := lockView(r); err == nil {
			return p
		}
		return apiPath(r)
	}
	rest := r.PathValue("path")
	if i := strings.LastIndexByte(rest, '/'); apiActions[rest[i+1:]] {
		rest = rest[:max(i, 0)]
	}
	return "/" + rest
}
