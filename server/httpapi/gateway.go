package httpapi

// What a member offers a gateway (latch gateway, cmd/latch): a process in
// front of the members of several cells that serves the API and console
// for all of them and sends each request to its cell. The trust decision:
//
//   - A gateway presents a client certificate issued by a CA the members
//     are told to trust for that role (Config.GatewayCAs, from the
//     server's APIGatewayCA, latchd --api-gateway-ca). Such a peer is
//     believed for the identity it names in Latch-Identity, as a
//     forwarding member is: the gateway verified the caller's certificate
//     against its own client CA first. It is not a member: it gets no
//     member rights and its requests are forwarded to the leader like any
//     client's.
//   - Anyone holding a key of that CA can act as any identity, so it must
//     issue gateway certificates only (not the client CA, which would let
//     every client speak for others).
//
// The pieces of this front the gateway serves itself (the guard, the
// error shape, the headers, the console files and the OpenAPI document)
// are leaf packages both fronts import: apiwire, console and apispec.

import "crypto/x509"

// isGatewayCert reports whether chain's leaf was issued for client use by
// a gateway CA.
func (a *API) isGatewayCert(chain []*x509.Certificate) bool {
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
