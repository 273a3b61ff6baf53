package server

// What a member offers a gateway (latch gateway, cmd/latch): a process in
// front of the members of several cells that serves the API and console
// for all of them and sends each request to its cell. The trust decision:
//
//   - A gateway presents a client certificate issued by a CA the members
//     are told to trust for that role (Config.APIGatewayCA, latchd
//     --api-gateway-ca). Such a peer is believed for the identity it names
//     in Latch-Identity, as a forwarding member is: the gateway verified
//     the caller's certificate against its own client CA first. It is not
//     a member: it gets no member rights and its requests are forwarded to
//     the leader like any client's.
//   - Anyone holding a key of that CA can act as any identity, so it must
//     issue gateway certificates only (not the client CA, which would let
//     every client speak for others).
//
// The rest of this file exports the pieces of this front the gateway
// serves itself (the guard, the console files, the OpenAPI document and
// the error shape), so that both fronts have one way to do each.

import (
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path"
)

// HeaderIdentity is the header a gateway (or a forwarding member) names
// the caller's identity in; members believe it only from those peers.
const HeaderIdentity = hdrIdentity

// HeaderSession is the header that carries a session token.
const HeaderSession = hdrSession

// HeaderRetry on a 503 says the request was not acted on.
const HeaderRetry = hdrRetry

func loadGatewayCA(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: APIGatewayCA: %v", ErrBadConfig, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%w: APIGatewayCA: %s holds no PEM certificate", ErrBadConfig, file)
	}
	return pool, nil
}

// isGatewayCert reports whether chain's leaf was issued for client use by
// a gateway CA.
func (a *apiFront) isGatewayCert(chain []*x509.Certificate) bool {
	if a.gateways == nil || len(chain) == 0 {
		return false
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: a.gateways, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err == nil
}

// APIGuard runs the API's browser guard (api_guard.go) for a front that
// is not a member: it sets the security headers and refuses, answering
// itself, a Host hostOK refuses, a cross-site request or a body that is
// not JSON. It reports whether r may be served.
func APIGuard(w http.ResponseWriter, r *http.Request, hostOK func(host string) bool) bool {
	a := &apiFront{hosts: apiHostSet{any: true}}
	if hostOK != nil && !hostOK(r.Host) {
		a.hosts = apiHostSet{}
	}
	return a.guard(w, r)
}

// WriteAPIError answers err as the API does: {"code", "name", "message"}
// with the status of its wire code.
func WriteAPIError(w http.ResponseWriter, err error) { apiError(w, err) }

// WriteAPIJSON answers v as JSON with status code, as the API does.
func WriteAPIJSON(w http.ResponseWriter, code int, v any) { writeJSON(w, code, v) }

// ConsoleFile returns a file of the web console ("" is its page) and its
// content type; ok is false for a name the console does not have.
func ConsoleFile(name string) (body []byte, contentType string, ok bool) {
	if name == "" {
		name = "index.html"
	}
	b, err := consoleFiles.ReadFile("console/" + path.Base(name))
	if err != nil {
		return nil, "", false
	}
	switch path.Ext(name) {
	case ".html":
		contentType = "text/html; charset=utf-8"
	case ".js":
		contentType = "text/javascript; charset=utf-8"
	case ".css":
		contentType = "text/css; charset=utf-8"
	}
	return b, contentType, true
}

// OpenAPIDocument is the API's OpenAPI document.
func OpenAPIDocument() []byte { return openAPIDoc }
