package apiwire

// The API's guard against the browser's world, run before any route:
//
//   - Host: a request must name this front by one of the names it serves
//     (HostSet), so a page whose name was rebound to this front's
//     address (DNS rebinding) is refused, 403.
//   - Cross-site: a request whose Origin is not the origin it was sent to,
//     or whose Sec-Fetch-Site says another site or origin sent it, is
//     refused, 403; only a top-level navigation (a link to the console)
//     may come from elsewhere, and only to read. Clients that are not
//     browsers send neither header.
//   - Bodies are JSON: a request carrying a body, or a Content-Type, must
//     say application/json, else 415. A browser cannot send that type to
//     another origin without a CORS preflight, which this API never
//     answers, so forms and no-cors fetches cannot reach a handler.
//   - Every answer carries a strict Content-Security-Policy (scripts,
//     styles and connections from this origin only, no inline script, no
//     framing), X-Frame-Options DENY and X-Content-Type-Options nosniff.

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"strings"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/session"
)

// csp is the console's and the API's Content-Security-Policy: the
// console's script and style are files of this origin; nothing inline,
// no plugin, no frame, no form target, no base rewrite.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// AnyHost among the names of a HostSet turns the Host check off (a proxy
// in front that rewrites Host, for instance).
const AnyHost = "*"

// HostSet is the names an API answers to. Its zero value allows none.
type HostSet struct {
	any     bool
	anyIP   bool // the API listens on every address: any IP literal names it
	names   map[string]bool
	ipNames map[string]bool // canonical IP strings
}

// Add makes h (a name, an IP literal, an unspecified address for every IP
// literal, or AnyHost) one of the set's.
func (hs *HostSet) Add(h string) {
	if h == AnyHost {
		hs.any = true
		return
	}
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
	if h == "" {
		return
	}
	if ip := net.ParseIP(h); ip != nil {
		if ip.IsUnspecified() {
			hs.anyIP = true
		}
		if hs.ipNames == nil {
			hs.ipNames = map[string]bool{}
		}
		hs.ipNames[ip.String()] = true
		return
	}
	if hs.names == nil {
		hs.names = map[string]bool{}
	}
	hs.names[h] = true
}

// Allows reports whether the Host header host (with or without a port)
// is one of the set's names.
func (hs HostSet) Allows(host string) bool {
	if hs.any {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if ip := net.ParseIP(host); ip != nil {
		return hs.anyIP || hs.ipNames[ip.String()]
	}
	return hs.names[host]
}

// Guard checks r against the rules above and sets the security headers;
// hostOK says whether r's Host names this front (nil: any does). It
// answers and returns false when r is refused.
func Guard(w http.ResponseWriter, r *http.Request, hostOK func(host string) bool) bool {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if hostOK != nil && !hostOK(r.Host) {
		WriteError(w, fmt.Errorf("%w: Host %q is not a name this member serves (latchd --api-hosts adds names)", namespace.ErrPermissionDenied, r.Host))
		return false
	}
	if err := crossSite(r); err != nil {
		WriteError(w, err)
		return false
	}
	if err := jsonBody(r); err != nil {
		WriteJSON(w, http.StatusUnsupportedMediaType, ErrorBody{Code: session.CodeMalformed, Name: session.CodeMalformed.String(), Message: err.Error()})
		return false
	}
	return true
}

// safeMethod: the request only reads.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// crossSite refuses a request another origin made a browser send.
func crossSite(r *http.Request) error {
	if o := r.Header.Get("Origin"); o != "" && !strings.EqualFold(o, "https://"+r.Host) {
		return fmt.Errorf("%w: cross-origin request from %q refused (this API serves only its own origin https://%s)", namespace.ErrPermissionDenied, o, r.Host)
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		if safeMethod(r.Method) && r.Header.Get("Sec-Fetch-Mode") == "navigate" {
			return nil // a link to the console from elsewhere: it only reads
		}
		return fmt.Errorf("%w: %s request (Sec-Fetch-Site: %s) refused: only this origin's pages may call the API", namespace.ErrPermissionDenied, site, site)
	}
	return nil
}

// jsonBody refuses a request whose body is not declared JSON: one with a
// Content-Type other than application/json, or with a body and none.
func jsonBody(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody || safeMethod(r.Method) {
			return nil
		}
		return fmt.Errorf("%w: a request body must be JSON with Content-Type: application/json (none given)", session.ErrMalformed)
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return fmt.Errorf("%w: Content-Type %q refused: the API takes application/json only", session.ErrMalformed, ct)
	}
	return nil
}
