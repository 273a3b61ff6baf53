package server

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"

	"github.com/latch-io/latch/session"
)

// AdminChecker decides whether a TLS identity (session.Identity of a
// verified client certificate of the cluster CA) is a cluster admin. The
// admin endpoint asks it, besides Config.Admins, before membership
// changes, snapshots and fault injection.
type AdminChecker interface {
	IsAdmin(identity string) bool
}

// AdminList is an AdminChecker over a fixed list (latchd --admins).
type AdminList []string

// IsAdmin reports whether the list names identity.
func (l AdminList) IsAdmin(identity string) bool {
	return identity != "" && slices.Contains(l, identity)
}

// adminCaller is who made an admin request, as its verified client certificate
// says.
type adminCaller struct {
	identity string // session.Identity; "" without a certificate
	member   string // member id of a member certificate, else ""
	admin    bool
}

func (c adminCaller) String() string {
	switch {
	case c.member != "":
		return "member " + c.member
	case c.identity != "":
		return fmt.Sprintf("%q", c.identity)
	}
	return "a client without a certificate"
}

// callerOf names the peer of an admin request. Only certificates the
// handshake verified against the cluster CA count (the admin listener asks
// for one and refuses a bad one); a plain-HTTP request has no caller.
func (s *Server) callerOf(r *http.Request) adminCaller {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
		return adminCaller{}
	}
	c := adminCaller{identity: session.Identity(*r.TLS)}
	c.member, _ = session.PeerMember(*r.TLS)
	c.admin = c.member == "" && s.isAdmin(c.identity)
	return c
}

// IsAdmin reports whether identity (of a verified certificate) is a
// cluster admin: Config.Admins lists it or Config.AdminCheck says so; in
// Dev without Admins any identity is (the dev CA's key is on this
// machine). Member identities are never admins.
func (s *Server) IsAdmin(identity string) bool { return s.isAdmin(identity) }

func (s *Server) isAdmin(identity string) bool {
	if identity == "" || strings.HasPrefix(identity, session.MemberURIPrefix) {
		return false
	}
	if s.cfg.Dev && len(s.cfg.Admins) == 0 {
		return true
	}
	if AdminList(s.cfg.Admins).IsAdmin(identity) {
		return true
	}
	return s.cfg.AdminCheck != nil && s.cfg.AdminCheck.IsAdmin(identity)
}

// memberOrAdmin wraps an admin handler that needs a member or admin
// identity: anyone else gets 403 with code "admin_denied" (the wire's
// session.ErrAdminDenied), before any redirect to the leader.
func (s *Server) memberOrAdmin(h func(http.ResponseWriter, *http.Request, adminCaller)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := s.callerOf(r)
		if c.member == "" && !c.admin {
			s.countRefused("admin")
			s.log.Warn("admin request refused", "path", r.URL.Path, "caller", c.String(), "remote", r.RemoteAddr)
			s.writeError(w, fmt.Errorf("%w: %s %s needs a member or admin certificate of the cluster CA; %s is neither",
				session.ErrAdminDenied, r.Method, r.URL.Path, c))
			return
		}
		h(w, r, c)
	}
}

// adminOnly wraps an admin handler that needs an admin identity (a member
// certificate is not enough: members never call it).
func (s *Server) adminOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := s.callerOf(r)
		if !c.admin {
			s.countRefused("admin")
			s.log.Warn("admin request refused", "path", r.URL.Path, "caller", c.String(), "remote", r.RemoteAddr)
			s.writeError(w, fmt.Errorf("%w: %s %s needs an admin certificate of the cluster CA (latchd --admins); %s is not one",
				session.ErrAdminDenied, r.Method, r.URL.Path, c))
			return
		}
		h(w, r)
	}
}

// loadMemberTLS loads the member certificate and cluster CA; Dev without
// them issues a member certificate from the development CA in
// <DataDir>/tls.
func (s *Server) loadMemberTLS() (*session.MemberTLS, error) {
	cfg := &s.cfg
	cert, key, ca := cfg.MemberCert, cfg.MemberKey, cfg.ClusterCA
	if cert == "" && cfg.Dev {
		dc, err := session.EnsureDevCerts(filepath.Join(cfg.DataDir, devTLSDir))
		if err != nil {
			return nil, err
		}
		if cert, key, err = dc.Member(cfg.ID); err != nil {
			return nil, err
		}
		if ca == "" {
			ca = dc.CA
		}
	}
	m, err := session.LoadMemberTLS(cfg.ID, cert, key, ca)
	if err != nil {
		return nil, fmt.Errorf("%w: MemberCert: %w", ErrBadConfig, err)
	}
	return m, nil
}

// validateMemberTLS checks that the member-traffic fields are set
// together, and set unless Dev.
func (c *Config) validateMemberTLS() error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrBadConfig, field, fmt.Sprintf(format, a...))
	}
	switch {
	case (c.MemberCert == "") != (c.MemberKey == ""):
		return bad("MemberKey", "MemberCert and MemberKey go together")
	case !c.Dev && c.MemberCert == "":
		return bad("MemberCert", "required unless Dev: members authenticate each other with mutual TLS (make one with `latch cert member`)")
	case !c.Dev && c.ClusterCA == "":
		return bad("ClusterCA", "required unless Dev: the CA that signs every member's and admin's certificate")
	case c.MemberCert != "" && c.ClusterCA == "":
		return bad("ClusterCA", "required with MemberCert")
	}
	for _, a := range c.Admins {
		if strings.HasPrefix(a, "latch://") {
			return bad("Admins", "%q is a member URI (members need no admin rights)", a)
		}
	}
	return nil
}

// mayChange checks that the caller may join, update or remove member id:
// an admin may change any member; a member only itself (so a member
// certificate cannot re-point, remove or impersonate another member).
// Replacing a live member needs an admin.
func (c adminCaller) mayChange(id string, replace bool) error {
	switch {
	case c.admin:
		return nil
	case replace:
		return fmt.Errorf("%w: replacing a live member needs an admin identity, and %s is not one", session.ErrAdminDenied, c)
	case c.member != "" && c.member != id:
		return fmt.Errorf("%w: %s may only join, update or remove itself, not %q", session.ErrAdminDenied, c, id)
	case c.member == "":
		return fmt.Errorf("%w: %s is neither a member nor an admin", session.ErrAdminDenied, c)
	}
	return nil
}
