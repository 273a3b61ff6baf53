package session

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMemberID(t *testing.T) {
	other, _ := url.Parse("spiffe://x/y")
	two := []*url.URL{MemberURI("n1"), MemberURI("n2")}
	for _, c := range []struct {
		name string
		uris []*url.URL
		want string
		ok   bool
	}{
		{"member", []*url.URL{MemberURI("n1")}, "n1", true},
		{"member among others", []*url.URL{other, MemberURI("n3")}, "n3", true},
		{"no member URI", []*url.URL{other}, "", false},
		{"two member URIs", two, "", false},
		{"empty id", []*url.URL{MemberURI("")}, "", false},
		{"nested path", []*url.URL{MemberURI("a/b")}, "", false},
	} {
		got, ok := MemberID(&x509.Certificate{URIs: c.uris})
		if got != c.want || ok != c.ok {
			t.Errorf("%s: MemberID = %q, %v; want %q, %v", c.name, got, ok, c.want, c.ok)
		}
	}
	// Unverified connections never name a member.
	leaf := &x509.Certificate{URIs: []*url.URL{MemberURI("n1")}}
	if _, ok := PeerMember(tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}); ok {
		t.Fatal("an unverified certificate counts as a member")
	}
	if id, ok := PeerMember(tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}, VerifiedChains: [][]*x509.Certificate{{leaf}}}); !ok || id != "n1" {
		t.Fatalf("verified member: %q %v", id, ok)
	}
}

func TestIssueAndLoadMemberTLS(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	ca, err := NewCA("test CA", now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caKey, _ := ca.KeyPEM()
	caFile, caKeyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	if err := (Leaf{Cert: ca.CertPEM(), Key: caKey}).Write(caFile, caKeyFile); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(caFile, caKeyFile); err != nil {
		t.Fatal(err)
	}
	m, err := ca.IssueMember("n1", []string{"10.0.0.1", "n1.example"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	mc, mk := filepath.Join(dir, "n1.pem"), filepath.Join(dir, "n1-key.pem")
	m.Write(mc, mk)
	mt, err := LoadMemberTLS("n1", mc, mk, caFile)
	if err != nil {
		t.Fatal(err)
	}
	leaf := mt.Cert.Leaf
	if leaf.Subject.CommonName != "" || !leaf.IPAddresses[0].Equal(net.ParseIP("10.0.0.1")) || leaf.DNSNames[0] != "n1.example" {
		t.Fatalf("member cert: CN %q, IPs %v, DNS %v", leaf.Subject.CommonName, leaf.IPAddresses, leaf.DNSNames)
	}
	if got := Identity(tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}); got != MemberURIPrefix+"n1" {
		t.Fatalf("member identity %q", got)
	}
	if leaf.NotAfter.After(now.Add(2 * time.Hour)) {
		t.Fatalf("validity not honoured: %v", leaf.NotAfter)
	}
	// The certificate must name the configured id.
	if _, err := LoadMemberTLS("n2", mc, mk, caFile); !errors.Is(err, ErrBadCert) || !strings.Contains(err.Error(), `"n1"`) {
		t.Fatalf("wrong id: %v", err)
	}
	// A client certificate is not a member certificate.
	cl, _ := ca.IssueClient("alice", now, time.Hour)
	cf, ck := filepath.Join(dir, "alice.pem"), filepath.Join(dir, "alice-key.pem")
	cl.Write(cf, ck)
	if _, err := LoadMemberTLS("alice", cf, ck, caFile); !errors.Is(err, ErrBadCert) {
		t.Fatalf("client cert as member: %v", err)
	}
	// A member certificate of another CA is refused.
	other, _ := NewCA("other", now, time.Hour)
	om, _ := other.IssueMember("n1", nil, now, time.Hour)
	of, ok := filepath.Join(dir, "o.pem"), filepath.Join(dir, "o-key.pem")
	om.Write(of, ok)
	if _, err := LoadMemberTLS("n1", of, ok, caFile); !errors.Is(err, ErrBadCert) {
		t.Fatalf("foreign member cert: %v", err)
	}
	// Client identities may not use the members' scheme.
	if _, err := ca.IssueClient(MemberURIPrefix+"n1", now, time.Hour); !errors.Is(err, ErrBadCert) {
		t.Fatalf("client named like a member: %v", err)
	}
}

// Raft's TLS configs: a member talks to a member; a client certificate of
// the same CA, a member certificate of another CA, or no certificate is
// refused by the handshake, both ways.
func TestRaftTLSAcceptsOnlyMembers(t *testing.T) {
	now := time.Now()
	ca, _ := NewCA("cluster", now, time.Hour)
	other, _ := NewCA("other", now, time.Hour)
	pair := func(l Leaf, err error) tls.Certificate {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		c, err := l.TLS()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	n1 := &MemberTLS{ID: "n1", Cert: pair(ca.IssueMember("n1", nil, now, time.Hour)), CAs: ca.Pool()}
	n2 := &MemberTLS{ID: "n2", Cert: pair(ca.IssueMember("n2", nil, now, time.Hour)), CAs: ca.Pool()}
	client := &MemberTLS{ID: "alice", Cert: pair(ca.IssueClient("alice", now, time.Hour)), CAs: ca.Pool()}
	foreign := &MemberTLS{ID: "n1", Cert: pair(other.IssueMember("n1", nil, now, time.Hour)), CAs: other.Pool()}

	handshake := func(srv, cli *tls.Config) (error, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		b, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		a, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		deadline := time.Now().Add(10 * time.Second)
		a.SetDeadline(deadline)
		b.SetDeadline(deadline)
		errc := make(chan error, 1)
		go func() {
			s := tls.Server(a, srv)
			err := s.Handshake()
			if err == nil {
				// TLS 1.3: the server's verdict on the client's certificate
				// reaches the client on its first read.
				_, err = s.Write([]byte{1})
			}
			errc <- err
			s.Close()
		}()
		c := tls.Client(b, cli)
		cerr := c.Handshake()
		if cerr == nil {
			_, cerr = c.Read(make([]byte, 1))
		}
		c.Close()
		return <-errc, cerr
	}
	if serr, cerr := handshake(n1.RaftServer(), n2.RaftClient()); serr != nil || cerr != nil {
		t.Fatalf("member to member: %v / %v", serr, cerr)
	}
	for name, cli := range map[string]*tls.Config{
		"client certificate of the cluster CA": client.RaftClient(),
		"member certificate of another CA":     {Certificates: foreign.RaftClient().Certificates, InsecureSkipVerify: true, MinVersion: tls.VersionTLS13, NextProtos: []string{RaftALPN}},
		"no certificate":                       {InsecureSkipVerify: true, MinVersion: tls.VersionTLS13, NextProtos: []string{RaftALPN}},
	} {
		if serr, _ := handshake(n1.RaftServer(), cli); serr == nil {
			t.Errorf("raft server accepted a peer with %s", name)
		}
	}
	// And a member never dials into a server that is not a member.
	notMember := &tls.Config{Certificates: client.RaftClient().Certificates, MinVersion: tls.VersionTLS13, NextProtos: []string{RaftALPN}}
	if _, cerr := handshake(notMember, n2.RaftClient()); cerr == nil {
		t.Error("raft client accepted a server that is not a member")
	}
}
