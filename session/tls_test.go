package session

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

func TestEnsureDevCertsCreatesOnceAndReuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	d, err := EnsureDevCerts(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{d.CA, d.CAKey, d.ServerCert, d.ServerKey} {
		if filepath.Dir(f) != dir {
			t.Errorf("%s not in %s", f, dir)
		}
	}
	for _, k := range []string{d.ServerKey, d.CAKey} {
		fi, err := os.Stat(k)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode %v, want 0600", k, fi.Mode().Perm())
		}
	}
	ca1, _ := os.ReadFile(d.CA)
	key1, _ := os.ReadFile(d.ServerKey)

	// Present and valid: reused byte for byte.
	if _, err := EnsureDevCerts(dir); err != nil {
		t.Fatal(err)
	}
	ca2, _ := os.ReadFile(d.CA)
	key2, _ := os.ReadFile(d.ServerKey)
	if !bytes.Equal(ca1, ca2) || !bytes.Equal(key1, key2) {
		t.Fatal("second EnsureDevCerts regenerated valid certificates")
	}

	// One file lost: the whole set is made anew (a new CA).
	if err := os.Remove(d.CAKey); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureDevCerts(dir); err != nil {
		t.Fatal(err)
	}
	ca3, _ := os.ReadFile(d.CA)
	if bytes.Equal(ca1, ca3) {
		t.Fatal("incomplete set was not regenerated")
	}
	if !d.usable(time.Now()) {
		t.Fatal("regenerated set is not usable")
	}
	// Close to expiry counts as unusable.
	if d.usable(time.Now().Add(2*365*24*time.Hour - 24*time.Hour)) {
		t.Fatal("a certificate a day from expiry counts as usable")
	}

	srv, err := tls.LoadX509KeyPair(d.ServerCert, d.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Error(err)
	}
	if err := srv.Leaf.VerifyHostname("::1"); err != nil {
		t.Error(err)
	}
	if err := srv.Leaf.VerifyHostname("localhost"); err != nil {
		t.Error(err)
	}
}

func TestMutualTLSIdentity(t *testing.T) {
	srvTLS, cliTLS := devTLS(t)
	s := startEcho(t, srvTLS, Config{})
	conn := dialTest(t, s.addr(), cliTLS, Config{})
	if _, err := Hello(testCtx(t), conn, "t"); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	srvConn := s.conns[0]
	s.mu.Unlock()
	if got := srvConn.Identity(); got != testClientName {
		t.Fatalf("server sees identity %q, want %q", got, testClientName)
	}
	if st := srvConn.ConnectionState().TLS; st.Version != tls.VersionTLS13 || st.NegotiatedProtocol != ALPN {
		t.Fatalf("TLS version %x, ALPN %q", st.Version, st.NegotiatedProtocol)
	}
	if got := conn.Identity(); got != "localhost" {
		t.Fatalf("client sees server identity %q", got)
	}
}

func TestTLSRejections(t *testing.T) {
	d, err := EnsureDevCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srvTLS, err := ServerTLS(d.ServerCert, d.ServerKey, d.CA)
	if err != nil {
		t.Fatal(err)
	}
	s := startEcho(t, srvTLS, Config{})
	other, err := EnsureDevCerts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	// A client that trusts another CA refuses the server.
	otherCert, otherKey, err := other.Client(testClientName)
	if err != nil {
		t.Fatal(err)
	}
	wrongCA, err := ClientTLS(other.CA, otherCert, otherKey)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, err := Dial(ctx, s.addr(), wrongCA, Config{}); err == nil {
		c.Close()
		t.Fatal("dial trusting the wrong CA succeeded")
	}

	// A client with a certificate from another CA, or none, is refused by
	// the server. In TLS 1.3 the server checks the client certificate after
	// the client finished its handshake, so the failure may surface on the
	// first request rather than in Dial.
	for name, files := range map[string][2]string{
		"foreign client cert": {otherCert, otherKey},
		"no client cert":      {"", ""},
	} {
		cfg, err := ClientTLS(d.CA, files[0], files[1])
		if err != nil {
			t.Fatal(err)
		}
		c, err := Dial(ctx, s.addr(), cfg, Config{})
		if err == nil {
			_, err = Hello(ctx, c, "t")
			c.Close()
		}
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
	}

	if _, err := ServerTLS(d.ServerCert, d.CAKey, ""); err == nil {
		t.Error("ServerTLS with a mismatched key succeeded")
	}
	if _, err := ClientTLS(filepath.Join(t.TempDir(), "missing.pem"), "", ""); err == nil {
		t.Error("ClientTLS with a missing CA succeeded")
	}
	noMTLS, err := ServerTLS(d.ServerCert, d.ServerKey, "")
	if err != nil || noMTLS.ClientAuth != tls.NoClientCert {
		t.Errorf("ServerTLS without client CA: %v, ClientAuth %v", err, noMTLS.ClientAuth)
	}
}

func TestIdentity(t *testing.T) {
	u, _ := url.Parse("spiffe://latch/worker")
	cases := []struct {
		name string
		cert *x509.Certificate
		want string
	}{
		{"common name wins", &x509.Certificate{Subject: pkix.Name{CommonName: "alice"}, URIs: []*url.URL{u}, DNSNames: []string{"a.example"}}, "alice"},
		{"then URI SAN", &x509.Certificate{URIs: []*url.URL{u}, DNSNames: []string{"a.example"}}, "spiffe://latch/worker"},
		{"then DNS SAN", &x509.Certificate{DNSNames: []string{"a.example", "b.example"}}, "a.example"},
		{"nothing", &x509.Certificate{}, ""},
	}
	for _, c := range cases {
		got := Identity(tls.ConnectionState{PeerCertificates: []*x509.Certificate{c.cert}})
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if got := Identity(tls.ConnectionState{}); got != "" {
		t.Errorf("no certificate: %q", got)
	}
}

// TestTLSResumption checks that connections made from one ClientTLS config
// resume their TLS session with a member they met before, keep the
// client's identity when they do, and keep a ticket per member address:
// two members with one server name (here both 127.0.0.1) each resume.
func TestTLSResumption(t *testing.T) {
	srvTLS, cliTLS := devTLS(t)
	members := []*echoServer{startEcho(t, srvTLS.Clone(), Config{}), startEcho(t, srvTLS.Clone(), Config{})}
	tickets := &countingCache{ClientSessionCache: cliTLS.ClientSessionCache}
	cliTLS.ClientSessionCache = tickets
	dial := func(s *echoServer) (resumed bool) {
		t.Helper()
		want := tickets.puts.Load() + 1
		conn := dialTest(t, s.addr(), cliTLS, Config{})
		defer conn.Close()
		if _, err := Hello(testCtx(t), conn, "t"); err != nil {
			t.Fatal(err)
		}
		s.mu.Lock()
		srvConn := s.conns[len(s.conns)-1]
		s.mu.Unlock()
		if got := srvConn.Identity(); got != testClientName {
			t.Fatalf("server sees identity %q on a connection (resumed %v), want %q", got, conn.ConnectionState().TLS.DidResume, testClientName)
		}
		// The ticket comes after the handshake: wait for it so the next
		// dial can offer it.
		waitFor(t, "a session ticket", func() bool { return tickets.puts.Load() >= want })
		return conn.ConnectionState().TLS.DidResume
	}
	for i, step := range []struct {
		member  int
		resumed bool
	}{{0, false}, {0, true}, {1, false}, {1, true}, {0, true}, {1, true}} {
		if got := dial(members[step.member]); got != step.resumed {
			t.Fatalf("dial %d to member %d: resumed %v, want %v", i, step.member, got, step.resumed)
		}
	}
}

// countingCache counts the session tickets put in it.
type countingCache struct {
	tls.ClientSessionCache
	puts atomic.Int64
}

func (c *countingCache) Put(key string, cs *tls.ClientSessionState) {
	c.puts.Add(1)
	c.ClientSessionCache.Put(key, cs)
}
