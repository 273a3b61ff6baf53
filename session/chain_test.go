package session

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// intermediateCA makes a root CA and an intermediate CA it signed: latch's
// own CAs (NewCA) sign leaves directly, but an operator's PKI may put an
// intermediate between the root the cluster trusts and the leaves.
func intermediateCA(t *testing.T, now time.Time) (root *x509.Certificate, inter *CA) {
	t.Helper()
	mk := func(name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, pathLenZero bool) (*x509.Certificate, *ecdsa.PrivateKey) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
			KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true, MaxPathLenZero: pathLenZero,
		}
		if parent == nil {
			parent, parentKey = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c, key
	}
	root, rootKey := mk("root", nil, nil, false)
	ic, ik := mk("intermediate", root, rootKey, true)
	return root, &CA{Cert: ic, Key: ik}
}

// TestVerifyChainThroughIntermediate: a leaf verifies through the
// intermediates sent with it, in every place latch checks a chain, and
// not without them.
func TestVerifyChainThroughIntermediate(t *testing.T) {
	now := time.Now()
	root, inter := intermediateCA(t, now)
	roots := x509.NewCertPool()
	roots.AddCert(root)
	m, err := inter.IssueMember("n1", []string{"127.0.0.1"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := m.TLS()
	if err != nil {
		t.Fatal(err)
	}
	chain := []*x509.Certificate{pair.Leaf, inter.Cert}
	opts := x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if err := VerifyChain(chain, opts); err != nil {
		t.Fatalf("leaf with its intermediate: %v", err)
	}
	if err := VerifyChain(chain[:1], opts); err == nil {
		t.Fatal("leaf without its intermediate verified")
	}
	if err := VerifyChain(nil, opts); err == nil {
		t.Fatal("an empty chain verified")
	}

	// Raft's handshake check (verifyMember) takes the peer's intermediates.
	mt := &MemberTLS{ID: "n2", CAs: roots}
	if err := mt.RaftServer().VerifyConnection(tls.ConnectionState{PeerCertificates: chain}); err != nil {
		t.Fatalf("raft: member chain with intermediate refused: %v", err)
	}
	if err := mt.RaftServer().VerifyConnection(tls.ConnectionState{PeerCertificates: chain[:1]}); !errors.Is(err, ErrNotMember) {
		t.Fatalf("raft: member leaf without intermediate: %v, want ErrNotMember", err)
	}

	// LoadMemberTLS verifies a certificate file that carries its chain.
	dir := t.TempDir()
	caFile := filepath.Join(dir, "root.pem")
	if err := os.WriteFile(caFile, pemBlock("CERTIFICATE", root.Raw), 0o600); err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "n1.pem"), filepath.Join(dir, "n1-key.pem")
	withChain := Leaf{Cert: append(append([]byte{}, m.Cert...), pemBlock("CERTIFICATE", inter.Cert.Raw)...), Key: m.Key}
	if err := withChain.Write(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadMemberTLS("n1", certFile, keyFile, caFile); err != nil {
		t.Fatalf("member file with its intermediate: %v", err)
	}
	if err := m.Write(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadMemberTLS("n1", certFile, keyFile, caFile); !errors.Is(err, ErrBadCert) {
		t.Fatalf("member file without its intermediate: %v, want ErrBadCert", err)
	}
}
