package server

import (
	"fmt"
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
