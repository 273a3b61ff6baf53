package session

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// A latch PKI has one cluster CA. It signs three kinds of leaf:
//
//   - member certificates: no common name, one URI SAN latch://member/<id>
//     (MemberURI), DNS and IP SANs for the member's hosts, usable as server
//     and as client. A member presents it on raft connections (both ways),
//     on the admin HTTPS endpoint, and by default on the client listener.
//   - client certificates: common name = the identity (Identity), client
//     use only. An identity never starts with "latch://" (IssueClient
//     refuses it), so no client name can read as a member's.
//   - server certificates: DNS and IP SANs, server use only (the dev
//     client listener).
//
// A certificate is a member certificate when it chains to the cluster CA
// and carries a member URI (MemberID); nothing else makes a peer a member.

// MemberURIPrefix starts the URI SAN that marks a member certificate; the
// member id follows it.
const MemberURIPrefix = "latch://member/"

// MemberURI is the URI SAN of member id's certificate.
func MemberURI(id string) *url.URL {
	return &url.URL{Scheme: "latch", Host: "member", Path: "/" + id}
}

// MemberID returns the member id a certificate names by its member URI SAN,
// and whether it has exactly one. It does not verify the certificate: use
// PeerMember on a verified connection.
func MemberID(cert *x509.Certificate) (string, bool) {
	id, n := "", 0
	for _, u := range cert.URIs {
		if u.Scheme != "latch" || u.Host != "member" {
			continue
		}
		n++
		id = strings.TrimPrefix(u.Path, "/")
	}
	if n != 1 || !validMemberID(id) {
		return "", false
	}
	return id, true
}

// validMemberID reports whether id can name a member in a certificate:
// IssueMember refuses what MemberID would not read back.
func validMemberID(id string) bool {
	return id != "" && !strings.ContainsAny(id, "/ \t\r\n,=")
}

// PeerMember returns the member id of a TLS peer whose certificate was
// verified against the cluster CA during the handshake and is a member
// certificate. A peer that presented no certificate, or one the handshake
// did not verify, is not a member.
func PeerMember(state tls.ConnectionState) (string, bool) {
	if len(state.PeerCertificates) == 0 || len(state.VerifiedChains) == 0 {
		return "", false
	}
	return MemberID(state.PeerCertificates[0])
}

// CA is a certificate authority that can issue latch certificates.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// NewCA makes a self-signed ECDSA P-256 CA named name, valid from an hour
// before now for validity.
func NewCA(name string, now time.Time, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"latch"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

// LoadCA reads a CA certificate and its private key (PEM).
func LoadCA(certFile, keyFile string) (*CA, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: CA key pair: %w", ErrBadCert, err)
	}
	if pair.Leaf == nil || !pair.Leaf.IsCA {
		return nil, fmt.Errorf("%w: %s is not a CA certificate", ErrBadCert, certFile)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%w: %s: key cannot sign", ErrBadCert, keyFile)
	}
	return &CA{Cert: pair.Leaf, Key: signer}, nil
}

// CertPEM is the CA certificate in PEM.
func (ca *CA) CertPEM() []byte { return pemBlock("CERTIFICATE", ca.Cert.Raw) }

// KeyPEM is the CA's private key in PEM (PKCS #8).
func (ca *CA) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return nil, err
	}
	return pemBlock("PRIVATE KEY", der), nil
}

// Pool is a certificate pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Leaf is an issued certificate and its private key, in PEM.
type Leaf struct {
	Cert, Key []byte
}

// Write writes the certificate (mode 0644) and key (mode 0600) atomically.
func (l Leaf) Write(certFile, keyFile string) error {
	if err := writeFileAtomic(keyFile, l.Key, 0o600); err != nil {
		return err
	}
	return writeFileAtomic(certFile, l.Cert, 0o644)
}

// TLS parses the pair for a tls.Config.
func (l Leaf) TLS() (tls.Certificate, error) { return tls.X509KeyPair(l.Cert, l.Key) }

// IssueMember issues member id's certificate: URI SAN MemberURI(id), the
// hosts (IP addresses or DNS names) as SANs, server and client use.
func (ca *CA) IssueMember(id string, hosts []string, now time.Time, validity time.Duration) (Leaf, error) {
	if !validMemberID(id) {
		return Leaf{}, fmt.Errorf("%w: member id %q: empty or has '/', spaces, ',' or '='", ErrBadCert, id)
	}
	dns, ips := splitHosts(hosts)
	return ca.issue(&x509.Certificate{
		URIs:        []*url.URL{MemberURI(id)},
		DNSNames:    dns,
		IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, now, validity)
}

// IssueClient issues a client certificate naming identity (its common
// name). Identities starting with "latch://" are refused: that scheme is
// the members'.
func (ca *CA) IssueClient(identity string, now time.Time, validity time.Duration) (Leaf, error) {
	if identity == "" || strings.HasPrefix(identity, "latch://") || strings.ContainsAny(identity, "\r\n\x00") {
		return Leaf{}, fmt.Errorf("%w: client identity %q: empty, a control character, or the reserved latch:// scheme", ErrBadCert, identity)
	}
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: identity, Organization: []string{"latch"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, now, validity)
}

// IssueServer issues a server-only certificate for hosts.
func (ca *CA) IssueServer(hosts []string, now time.Time, validity time.Duration) (Leaf, error) {
	dns, ips := splitHosts(hosts)
	cn := "latch server"
	if len(hosts) > 0 {
		cn = hosts[0]
	}
	return ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: []string{"latch"}},
		DNSNames:    dns,
		IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, now, validity)
}

func (ca *CA) issue(tmpl *x509.Certificate, now time.Time, validity time.Duration) (Leaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Leaf{}, err
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(validity)
	if tmpl.NotAfter.After(ca.Cert.NotAfter) {
		tmpl.NotAfter = ca.Cert.NotAfter
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return Leaf{}, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Leaf{}, err
	}
	return Leaf{Cert: pemBlock("CERTIFICATE", der), Key: pemBlock("PRIVATE KEY", kder)}, nil
}

// splitHosts sorts hosts into DNS names and IP addresses.
func splitHosts(hosts []string) (dns []string, ips []net.IP) {
	for _, h := range hosts {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, h)
		}
	}
	return dns, ips
}

// MemberTLS is the TLS material of one cluster member: its member
// certificate and the cluster CA that every other member's certificate
// must chain to.
type MemberTLS struct {
	ID   string
	Cert tls.Certificate
	CAs  *x509.CertPool
}

// RaftALPN is the application protocol of raft connections between members.
const RaftALPN = "latch-raft/1"

// LoadMemberTLS loads member id's certificate and key and the cluster CA
// (PEM files) and checks that the certificate is a member certificate
// naming id, signed by that CA.
func LoadMemberTLS(id, certFile, keyFile, caFile string) (*MemberTLS, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: member key pair: %w", ErrBadCert, err)
	}
	pool, err := loadPool(caFile)
	if err != nil {
		return nil, err
	}
	got, ok := MemberID(pair.Leaf)
	if !ok {
		return nil, fmt.Errorf("%w: %s is not a member certificate (no %s<id> URI SAN; make one with `latch cert member`)", ErrBadCert, certFile, MemberURIPrefix)
	}
	if got != id {
		return nil, fmt.Errorf("%w: %s names member %q, not %q", ErrBadCert, certFile, got, id)
	}
	chain, err := parseChain(pair)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBadCert, certFile, err)
	}
	if err := VerifyChain(chain, x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, fmt.Errorf("%w: %s is not signed by the cluster CA %s: %w", ErrBadCert, certFile, caFile, err)
	}
	return &MemberTLS{ID: id, Cert: pair, CAs: pool}, nil
}

// VerifyChain checks that chain[0], a leaf certificate, chains to
// opts.Roots for one of opts.KeyUsages, through the other certificates of
// chain as intermediates: the chain a TLS peer sends, or a certificate
// file's. It is the one chain check of latch (members' raft and admin
// connections, the HTTP API's clients and forwarding members, a member's
// own certificate at load), so that each accepts a CA's intermediate the
// same way. opts.Intermediates is replaced.
func VerifyChain(chain []*x509.Certificate, opts x509.VerifyOptions) error {
	if len(chain) == 0 {
		return errors.New("no certificate")
	}
	opts.Intermediates = x509.NewCertPool()
	for _, c := range chain[1:] {
		opts.Intermediates.AddCert(c)
	}
	_, err := chain[0].Verify(opts)
	return err
}

// parseChain returns the certificates of a loaded key pair, leaf first.
func parseChain(pair tls.Certificate) ([]*x509.Certificate, error) {
	chain := []*x509.Certificate{pair.Leaf}
	for _, der := range pair.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, err
		}
		chain = append(chain, c)
	}
	return chain, nil
}

// ErrNotMember is the handshake error when a raft peer's certificate is
// not a member certificate of the cluster CA.
var ErrNotMember = errors.New("latch: peer is not a cluster member (its certificate has no member URI from the cluster CA)")

// verifyMember checks, without a host name, that the peer's certificate
// chains to the cluster CA for usage and is a member certificate.
func (m *MemberTLS) verifyMember(usage x509.ExtKeyUsage) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("%w: no certificate", ErrNotMember)
		}
		if err := VerifyChain(cs.PeerCertificates, x509.VerifyOptions{Roots: m.CAs, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			return fmt.Errorf("%w: %w", ErrNotMember, err)
		}
		if _, ok := MemberID(cs.PeerCertificates[0]); !ok {
			return ErrNotMember
		}
		return nil
	}
}

// RaftServer is the TLS config of the raft listener: TLS 1.3, and every
// peer must present a member certificate of the cluster CA.
func (m *MemberTLS) RaftServer() *tls.Config {
	return &tls.Config{
		MinVersion:       tls.VersionTLS13,
		NextProtos:       []string{RaftALPN},
		Certificates:     []tls.Certificate{m.Cert},
		ClientAuth:       tls.RequireAndVerifyClientCert,
		ClientCAs:        m.CAs,
		VerifyConnection: m.verifyMember(x509.ExtKeyUsageClientAuth),
	}
}

// RaftClient is the TLS config for dialing another member's raft address:
// it presents this member's certificate and accepts only a member
// certificate of the cluster CA. Raft knows members by address, which a
// certificate need not list, so no host name is checked: holding a member
// certificate is what makes a peer a member.
func (m *MemberTLS) RaftClient() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{RaftALPN},
		Certificates: []tls.Certificate{m.Cert},
		// The chain and the member URI are checked by VerifyConnection
		// instead of against a host name.
		InsecureSkipVerify: true,
		VerifyConnection:   m.verifyMember(x509.ExtKeyUsageServerAuth),
	}
}

// AdminServer is the TLS config of the admin HTTPS endpoint: it serves the
// member certificate and verifies a client certificate of the cluster CA
// when one is offered (the handlers decide what needs one).
func (m *MemberTLS) AdminServer() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{m.Cert},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    m.CAs,
	}
}

// AdminClient is the TLS config a member uses to call another member's
// admin endpoint (joins, address updates): it presents the member
// certificate and, as for raft, accepts only a member of the cluster CA.
func (m *MemberTLS) AdminClient() *tls.Config {
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		Certificates:       []tls.Certificate{m.Cert},
		InsecureSkipVerify: true,
		VerifyConnection:   m.verifyMember(x509.ExtKeyUsageServerAuth),
	}
}

// AdminTLS returns the TLS config of a client of the admin HTTPS endpoint
// (operators, harnesses): it trusts caFile and, with certFile, presents
// that certificate (an admin's, or a member's).
func AdminTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	c, err := ClientTLS(caFile, certFile, keyFile)
	if err != nil {
		return nil, err
	}
	c.MinVersion, c.NextProtos = tls.VersionTLS12, nil
	return c, nil
}
