package httpapi

// Who calls the API: the TLS the API serves (the client front's certificate
// and client CA, member certificates accepted for forwarding) and the caller
// a request is served for (doc.go has the whole design).

import (
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"

	"github.com/latch-io/latch/server/apiwire"
	"github.com/latch-io/latch/session"
)

// tlsConfig is the client front's TLS (certificate, client CA) for HTTP.
// A member's certificate is accepted as a client certificate too (it
// forwards), and is recognised by isMemberCert.
func (a *API) tlsConfig() (*tls.Config, error) {
	base := a.cfg.ClientTLS
	if base == nil || len(base.Certificates) == 0 || len(base.Certificates[0].Certificate) == 0 {
		return nil, errors.New("the api needs the client front's certificate")
	}
	a.ownCert = base.Certificates[0].Certificate[0]
	pool, required := base.ClientCAs, base.ClientAuth == tls.RequireAndVerifyClientCert
	a.verifyClients = pool != nil
	c := base.Clone()
	c.NextProtos = []string{"h2", "http/1.1"}
	c.ClientAuth = tls.RequestClientCert
	if required {
		c.ClientAuth = tls.RequireAnyClientCert
	}
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 || a.isMemberCert(cs.PeerCertificates) || a.isGatewayCert(cs.PeerCertificates) {
			return nil // required: RequireAnyClientCert refused it already
		}
		if pool == nil {
			return nil // not verified, so it names nobody (callerOf)
		}
		return session.VerifyChain(cs.PeerCertificates, x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	}
	fwdTLS := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{"h2", "http/1.1"},
		Certificates: []tls.Certificate{a.cfg.MemberCert},
		// The leader must present a member's certificate; the name it
		// was issued for is irrelevant (members dial by address).
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !a.isMemberCert(cs.PeerCertificates) {
				return errors.New("latch: the leader's api did not present a member certificate")
			}
			return nil
		},
	}
	a.fwd = apiwire.ForwardClient(fwdTLS)
	return c, nil
}

// isMemberCert reports whether a peer's chain (leaf first) is a member's:
// the certificate this member serves with (members may share the client
// front's certificate, as `latchd --dev` and the process harness do), or
// a member certificate of the cluster CA (session.MemberID), which
// forwards present, verified through the intermediates the peer sent as
// raft connections verify it.
func (a *API) isMemberCert(chain []*x509.Certificate) bool {
	if subtle.ConstantTimeCompare(chain[0].Raw, a.ownCert) == 1 {
		return true
	}
	if _, ok := session.MemberID(chain[0]); !ok {
		return false
	}
	return session.VerifyChain(chain, x509.VerifyOptions{Roots: a.cfg.MemberCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}) == nil
}

// caller is who sent an API request.
type caller struct {
	identity  string
	member    bool // the peer holds a member certificate
	forwarded bool // a member forwarded the request on the identity's behalf
}

func (a *API) callerOf(r *http.Request) caller {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return caller{}
	}
	if a.isMemberCert(r.TLS.PeerCertificates) {
		c := caller{identity: session.Identity(*r.TLS), member: true}
		if r.Header.Get(hdrForwarded) != "" {
			c.forwarded, c.identity = true, r.Header.Get(hdrIdentity)
		}
		return c
	}
	if a.isGatewayCert(r.TLS.PeerCertificates) {
		return caller{identity: r.Header.Get(hdrIdentity)} // gateway.go
	}
	if !a.verifyClients {
		return caller{} // an unverified certificate names nobody
	}
	return caller{identity: session.Identity(*r.TLS)}
}
