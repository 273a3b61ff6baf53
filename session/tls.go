package session

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
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
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS13, NextProtos: []string{ALPN}}
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
	CA         string // CA certificate: the client trusts it; the server verifies clients with it
	ServerCert string // for 127.0.0.1, ::1 and localhost
	ServerKey  string
	ClientCert string // common name DevClientName
	ClientKey  string
}

// DevClientName is the identity of the development client certificate.
const DevClientName = "latch-dev-client"

// devRenewBefore makes EnsureDevCerts replace certificates this close to
// expiry instead of handing out ones that die during a run.
const devRenewBefore = 7 * 24 * time.Hour

// EnsureDevCerts makes sure dir holds a development CA (ECDSA P-256), a
// server certificate for 127.0.0.1, ::1 and localhost, and a client
// certificate, as ca.pem, server.pem, server-key.pem, client.pem and
// client-key.pem (keys mode 0600). Files that exist, parse and are not near
// expiry are reused; otherwise all are made anew. The CA key is never
// written: a new certificate needs a new CA, which is fine for dev.
func EnsureDevCerts(dir string) (DevCerts, error) {
	d := DevCerts{
		CA:         filepath.Join(dir, "ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"),
		ServerKey:  filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"),
		ClientKey:  filepath.Join(dir, "client-key.pem"),
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

// usable reports whether all files exist, the pairs load, the leaves chain
// to the CA and none is near expiry.
func (d DevCerts) usable(now time.Time) bool {
	pool, err := loadPool(d.CA)
	if err != nil {
		return false
	}
	for _, p := range [][2]string{{d.ServerCert, d.ServerKey}, {d.ClientCert, d.ClientKey}} {
		pair, err := tls.LoadX509KeyPair(p[0], p[1])
		if err != nil {
			return false
		}
		leaf := pair.Leaf
		if leaf == nil || now.Add(devRenewBefore).After(leaf.NotAfter) {
			return false
		}
		opts := x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
		if _, err := leaf.Verify(opts); err != nil {
			return false
		}
	}
	return true
}

func (d DevCerts) generate(now time.Time) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "latch dev CA", Organization: []string{"latch"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	leaf := func(cn string, usage x509.ExtKeyUsage, dns []string, ips []net.IP) (cert, key []byte, err error) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      pkix.Name{CommonName: cn, Organization: []string{"latch"}},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(2 * 365 * 24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			DNSNames:     dns,
			IPAddresses:  ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		kDER, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			return nil, nil, err
		}
		return pemBlock("CERTIFICATE", der), pemBlock("PRIVATE KEY", kDER), nil
	}
	srvCert, srvKey, err := leaf("localhost", x509.ExtKeyUsageServerAuth,
		[]string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback})
	if err != nil {
		return err
	}
	cliCert, cliKey, err := leaf(DevClientName, x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return err
	}
	// Keys first and the CA last: a crash midway leaves a set that usable
	// rejects, so the next call starts over.
	files := []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{d.ServerKey, srvKey, 0o600},
		{d.ClientKey, cliKey, 0o600},
		{d.ServerCert, srvCert, 0o644},
		{d.ClientCert, cliCert, 0o644},
		{d.CA, pemBlock("CERTIFICATE", caDER), 0o644},
	}
	for _, f := range files {
		if err := writeFileAtomic(f.path, f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
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
