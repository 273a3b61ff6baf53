package admin

import (
	"fmt"
	"net/http"

	"github.com/latch-io/latch/session"
)

// Caller is who made an admin request, as its verified client certificate
// says.
type Caller struct {
	Identity string // session.Identity; "" without a certificate
	Member   string // member id of a member certificate, else ""
	Admin    bool
}

func (c Caller) String() string {
	switch {
	case c.Member != "":
		return "member " + c.Member
	case c.Identity != "":
		return fmt.Sprintf("%q", c.Identity)
	}
	return "a client without a certificate"
}

// MayChange checks that the caller may join, update or remove member id:
// an admin may change any member; a member only itself (so a member
// certificate cannot re-point, remove or impersonate another member).
// Replacing a live member needs an admin.
func (c Caller) MayChange(id string, replace bool) error {
	switch {
	case c.Admin:
		return nil
	case replace:
		return fmt.Errorf("%w: replacing a live member needs an admin identity, and %s is not one", session.ErrAdminDenied, c)
	case c.Member != "" && c.Member != id:
		return fmt.Errorf("%w: %s may only join, update or remove itself, not %q", session.ErrAdminDenied, c, id)
	case c.Member == "":
		return fmt.Errorf("%w: %s is neither a member nor an admin", session.ErrAdminDenied, c)
	}
	return nil
}

// callerOf names the peer of an admin request. Only certificates the
// handshake verified against the cluster CA count (the admin listener asks
// for one and refuses a bad one); a plain-HTTP request has no caller.
func (e *endpoint) callerOf(r *http.Request) Caller {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		return Caller{}
	}
	c := Caller{Identity: session.Identity(*r.TLS)}
	c.Member, _ = session.PeerMember(*r.TLS)
	c.Admin = c.Member == "" && e.m.IsAdmin(c.Identity)
	return c
}

// memberOrAdmin wraps an admin handler that needs a member or admin
// identity: anyone else gets 403 with code "admin_denied" (the wire's
// session.ErrAdminDenied), before any redirect to the leader.
func (e *endpoint) memberOrAdmin(h func(http.ResponseWriter, *http.Request, Caller)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := e.callerOf(r)
		if c.Member == "" && !c.Admin {
			e.refuse(w, r, c, fmt.Errorf("%w: %s %s needs a member or admin certificate of the cluster CA; %s is neither",
				session.ErrAdminDenied, r.Method, r.URL.Path, c))
			return
		}
		h(w, r, c)
	}
}

// adminOnly wraps an admin handler that needs an admin identity (a member
// certificate is not enough: members never call it).
func (e *endpoint) adminOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := e.callerOf(r)
		if !c.Admin {
			e.refuse(w, r, c, fmt.Errorf("%w: %s %s needs an admin certificate of the cluster CA (latchd --admins); %s is not one",
				session.ErrAdminDenied, r.Method, r.URL.Path, c))
			return
		}
		h(w, r)
	}
}

func (e *endpoint) refuse(w http.ResponseWriter, r *http.Request, c Caller, err error) {
	e.m.Refused()
	e.cfg.Log.Warn("admin request refused", "path", r.URL.Path, "caller", c.String(), "remote", r.RemoteAddr)
	e.writeError(w, err)
}
