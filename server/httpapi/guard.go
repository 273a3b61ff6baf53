package httpapi

// The names this member's API answers to, for the guard every request
// passes before any route (the rules: server/apiwire/guard.go): a page
// whose name was rebound to this member's address is refused, and so are
// cross-site requests and bodies that are not JSON.

import (
	"crypto/x509"
	"net"
	"net/http"

	"github.com/latch-io/latch/server/apiwire"
)

// APIAnyHost in Config.APIHosts turns the Host check off (a proxy in
// front that rewrites Host, for instance).
const APIAnyHost = apiwire.AnyHost

// apiHosts resolves the names this member's API serves: the host of its
// listen address (every IP literal when it is unspecified), localhost,
// 127.0.0.1, ::1, the DNS names and IP addresses of its certificate, and
// Config.APIHosts.
func (a *API) apiHosts() apiwire.HostSet {
	var hs apiwire.HostSet
	for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
		hs.Add(h)
	}
	if host, _, err := net.SplitHostPort(a.addr); err == nil {
		hs.Add(host)
	}
	if cert, err := x509.ParseCertificate(a.ownCert); err == nil {
		for _, n := range cert.DNSNames {
			hs.Add(n)
		}
		for _, ip := range cert.IPAddresses {
			hs.Add(ip.String())
		}
	}
	for _, h := range a.cfg.Hosts {
		hs.Add(h)
	}
	return hs
}

// guard runs the API's guard (apiwire.Guard) with this member's names.
func (a *API) guard(w http.ResponseWriter, r *http.Request) bool {
	return apiwire.Guard(w, r, a.hosts.Allows)
}
