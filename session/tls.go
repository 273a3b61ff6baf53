package session

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/user"
	"path/filepath"
	"time"
)

// ServerTLS returns a server TLS config for the certificate in certFile and
// keyFile (PEM). With clientCAFile every client must present a certificate
// signed by that CA (mutual TLS; the certificate names the client, see
// Identity); without it no client certificate is asked for.
func ServerTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: server key pair: %w", ErrBadCert, err)
	}
	c := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{ALPN},
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.NoClientCert,
	}
	if clientCAFile != "" {
		pool, err := loadPool(clientCAFile)
		if err != nil {
			return nil, err
		}
		c.ClientCAs = pool
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// ClientTLS returns a client TLS config that trusts the CA in caFile (the
// system roots when caFile is "") and, when certFile is set, presents that
// certificate with the key in keyFile.
//
// Connections made with the config resume TLS sessions: a member hands
// each connection a session ticket, and the next connection to that
// member presents it instead of exchanging and verifying certificates
// again. The key exchange stays fresh (TLS 1.3 PSK with (EC)DHE, no 0-RTT
// data), and a member resumes a session only while the client certificate
// it was opened with still verifies against its client CAs and has not
// expired. Everyone using one config shares its tickets, so one config
// stands for one identity, as its certificate already does.
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	c := &tls.Config{
		MinVersion: tls.VersionTLS13, NextProtos: []string{ALPN},
		ClientSessionCache: NewTicketCache(),
	}
	if caFile != "" {
		pool, err := loadPool(caFile)
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
	}
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: client key pair: %w", ErrBadCert, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// NewTicketCache returns the TLS session cache a client config keeps its
// tickets in (Dial keys them by member address): room for 256, one per
// member met (a cluster has a handful of members; a client of several
// cells meets each cell's).
func NewTicketCache() tls.ClientSessionCache { return tls.NewLRUClientSessionCache(256) }

func loadPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: CA: %w", ErrBadCert, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%w: no certificate in %s", ErrBadCert, file)
	}
	return pool, nil
}

// Identity names the peer of a TLS connection by its leaf certificate: the
// subject common name, else the first URI SAN, else the first DNS SAN. It is
// "" when the peer presented no certificate.
func Identity(state tls.ConnectionState) string {
	if len(state.PeerCertificates) == 0 {
		return ""
	}
	leaf := state.PeerCertificates[0]
	switch {
	case leaf.Subject.CommonName != "":
		return leaf.Subject.CommonName
	case len(leaf.URIs) > 0:
		return leaf.URIs[0].String()
	case len(leaf.DNSNames) > 0:
		return leaf.DNSNames[0]
	}
	return ""
}

// DevCerts are the PEM files of a development PKI made by EnsureDevCerts.
type DevCerts struct {
	Dir        string
	CA         string // CA certificate: clients and members trust it
	CAKey      string // its key (mode 0600): Member and Client issue with it
	ServerCert string // for 127.0.0.1, ::1 and localhost
	ServerKey  string
}

// DevIdentity is the identity of this OS user's development client
// certificate: "dev-" and $USER, else the process's account. The CLI's dev
// discovery issues it, and latchd --dev makes it the admin.
func DevIdentity() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); name == "" && err == nil {
		name = u.Username
	}
	if name == "" {
		name = "unknown"
	}
	return "dev-" + name
}

// devHosts are the SANs of every development server and member certificate.
var devHosts = []string{"localhost", "127.0.0.1", "::1"}

// devRenewBefore makes EnsureDevCerts replace certificates this close to
// expiry instead of handing out ones that die during a run.
const devRenewBefore = 7 * 24 * time.Hour

// devLeafValidity is how long development leaves last.
const devLeafValidity = 2 * 365 * 24 * time.Hour

// EnsureDevCerts makes sure dir holds a development CA (ECDSA P-256) with
// its key and a server certificate for 127.0.0.1, ::1 and localhost, as
// ca.pem, ca-key.pem, server.pem and server-key.pem (keys mode 0600).
// Files that exist, parse and are not near expiry are reused; otherwise
// all are made anew (and member and client certificates issued earlier
// stop verifying, so Member and Client reissue them). Whoever can read
// ca-key.pem can mint any identity, a member's included: it is for one
// developer's machine only.
func EnsureDevCerts(dir string) (DevCerts, error) {
	d := DevCerts{
		Dir:        dir,
		CA:         filepath.Join(dir, "ca.pem"),
		CAKey:      filepath.Join(dir, "ca-key.pem"),
		ServerCert: filepath.Join(dir, "server.pem"),
		ServerKey:  filepath.Join(dir, "server-key.pem"),
	}
	if d.usable(time.Now()) {
		return d, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return DevCerts{}, fmt.Errorf("latch: dev certs: %w", err)
	}
	if err := d.generate(time.Now()); err != nil {
		return DevCerts{}, fmt.Errorf("latch: dev certs: %w", err)
	}
	return d, nil
}

// usable reports whether the CA pair and the server pair load, the server
// certificate chains to the CA and neither is near expiry.
func (d DevCerts) usable(now time.Time) bool {
	ca, err := LoadCA(d.CA, d.CAKey)
	if err != nil || now.Add(devRenewBefore).After(ca.Cert.NotAfter) {
		return false
	}
	return leafUsable(d.ServerCert, d.ServerKey, ca.Pool(), now, func(*x509.Certificate) bool { return true })
}

// leafUsable reports whether a pair loads, chains to pool, is not near
// expiry and passes ok.
func leafUsable(certFile, keyFile string, pool *x509.CertPool, now time.Time, ok func(*x509.Certificate) bool) bool {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return false
	}
	leaf := pair.Leaf
	if leaf == nil || now.Add(devRenewBefore).After(leaf.NotAfter) || !ok(leaf) {
		return false
	}
	chain, err := parseChain(pair)
	if err != nil {
		return false
	}
	return VerifyChain(chain, x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}) == nil
}

func (d DevCerts) generate(now time.Time) error {
	ca, err := NewCA("latch dev CA", now, 10*365*24*time.Hour)
	if err != nil {
		return err
	}
	srv, err := ca.IssueServer(devHosts, now, devLeafValidity)
	if err != nil {
		return err
	}
	caKey, err := ca.KeyPEM()
	if err != nil {
		return err
	}
	// Keys first and the CA last: a crash midway leaves a set that usable
	// rejects, so the next call starts over.
	if err := writeFileAtomic(d.CAKey, caKey, 0o600); err != nil {
		return err
	}
	if err := srv.Write(d.ServerCert, d.ServerKey); err != nil {
		return err
	}
	return writeFileAtomic(d.CA, ca.CertPEM(), 0o644)
}

// Member returns the files of member id's development certificate
// (member-<id>.pem and member-<id>-key.pem in the dev dir, for 127.0.0.1,
// ::1 and localhost), issuing it when missing, stale or not from this CA.
func (d DevCerts) Member(id string) (certFile, keyFile string, err error) {
	certFile = filepath.Join(d.Dir, "member-"+fileSafe(id)+".pem")
	keyFile = filepath.Join(d.Dir, "member-"+fileSafe(id)+"-key.pem")
	named := func(c *x509.Certificate) bool { got, ok := MemberID(c); return ok && got == id }
	err = d.ensureLeaf(certFile, keyFile, named, func(ca *CA, now time.Time) (Leaf, error) {
		return ca.IssueMember(id, devHosts, now, devLeafValidity)
	})
	return certFile, keyFile, err
}

// Client returns the files of a development client certificate naming
// identity (clients/<identity>.pem and -key.pem in the dev dir), issuing
// it when missing, stale or not from this CA. Each dev client can so have
// an identity of its own.
func (d DevCerts) Client(identity string) (certFile, keyFile string, err error) {
	dir := filepath.Join(d.Dir, "clients")
	certFile = filepath.Join(dir, fileSafe(identity)+".pem")
	keyFile = filepath.Join(dir, fileSafe(identity)+"-key.pem")
	named := func(c *x509.Certificate) bool { return c.Subject.CommonName == identity }
	err = d.ensureLeaf(certFile, keyFile, named, func(ca *CA, now time.Time) (Leaf, error) {
		return ca.IssueClient(identity, now, devLeafValidity)
	})
	return certFile, keyFile, err
}

func (d DevCerts) ensureLeaf(certFile, keyFile string, ok func(*x509.Certificate) bool, issue func(*CA, time.Time) (Leaf, error)) error {
	ca, err := LoadCA(d.CA, d.CAKey)
	if err != nil {
		return fmt.Errorf("latch: dev certs: %w", err)
	}
	now := time.Now()
	if leafUsable(certFile, keyFile, ca.Pool(), now, ok) {
		return nil
	}
	leaf, err := issue(ca, now)
	if err != nil {
		return fmt.Errorf("latch: dev certs: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(certFile), 0o700); err != nil {
		return fmt.Errorf("latch: dev certs: %w", err)
	}
	if err := leaf.Write(certFile, keyFile); err != nil {
		return fmt.Errorf("latch: dev certs: %w", err)
	}
	return nil
}

// fileSafe maps a name to a file name: letters, digits, '.', '-' and '_'
// stay, anything else becomes '_' (the certificate's own name is checked
// on reuse, so two names sharing a file only cost a reissue).
func fileSafe(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) == 0 || b[0] == '.' {
		return "_" + string(b)
	}
	return string(b)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		// crypto/rand does not fail on supported platforms; a fixed serial
		// would still produce a valid (if less unique) dev certificate.
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// writeFileAtomic writes via a temporary file and rename so a reader never
// sees half a PEM file, and a key file never exists with a looser mode.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(name, mode)); err != nil {
		os.Remove(name)
		return err
	}
	if err := os.Rename(name, path); err != nil {
		os.Remove(name)
		return err
	}
	return nil
}
