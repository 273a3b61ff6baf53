package client

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/namespace/store"
	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// clientCA issues client certificates naming identities, for clusters
// started with --tls-client-ca (the dev PKI keeps no CA key).
type clientCA struct {
	t    *testing.T
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	File string // ca.pem, for --tls-client-ca
}

func newClientCA(t *testing.T) *clientCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test client CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &clientCA{t: t, dir: t.TempDir(), cert: cert, key: key}
	ca.File = ca.write("ca.pem", "CERTIFICATE", der)
	return ca
}

func (ca *clientCA) write(name, typ string, der []byte) string {
	p := filepath.Join(ca.dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		ca.t.Fatal(err)
	}
	return p
}

// issue returns a client certificate and key whose CN is identity.
func (ca *clientCA) issue(identity string) (certFile, keyFile string) {
	ca.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		ca.t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: identity},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		ca.t.Fatal(err)
	}
	return ca.write(identity+".pem", "CERTIFICATE", der), ca.write(identity+"-key.pem", "PRIVATE KEY", kder)
}

// dialAs connects to a process cluster presenting identity's certificate
// ("" presents none).
func dialAs(t *testing.T, c *proc.Cluster, ca *clientCA, identity string) (*Client, error) {
	t.Helper()
	var cert, key string
	if identity != "" {
		cert, key = ca.issue(identity)
	}
	tlsConf, err := session.ClientTLS(c.Certs.CA, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	var eps []string
	for _, n := range c.Nodes {
		eps = append(eps, n.ClientAddr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := Dial(ctx, Config{
		Endpoints: eps, TLS: tlsConf, SessionTTL: 5 * time.Second,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	})
	if err == nil {
		t.Cleanup(func() { cl.Close() })
	}
	return cl, err
}

// memberDumps waits until every member applied the same index, stops
// them (SIGTERM) and returns each one's namespace dump.
func memberDumps(t *testing.T, c *proc.Cluster) []string {
	t.Helper()
	// Every member applies the same last index first, and no more writes
	// come: the leader publishes each member's addresses through the log
	// once it learns them, so that must be done too (else a member stopped
	// first can miss the last one).
	proc.Eventually(t, "members' applied indexes meet", func() error {
		var applied []uint64
		for _, n := range c.Nodes {
			st, err := n.Status()
			if err != nil {
				t.Fatal(err)
			}
			published := 0
			for _, m := range st.Members {
				if m.ClientAddr != "" {
					published++
				}
			}
			if published != len(c.Nodes) {
				return fmt.Errorf("%s knows the addresses of %d of %d members", st.ID, published, len(c.Nodes))
			}
			applied = append(applied, st.AppliedIndex)
		}
		for _, a := range applied {
			if a != applied[0] {
				return fmt.Errorf("applied %v", applied)
			}
		}
		return nil
	})
	var out []string
	for _, n := range c.Nodes {
		n.Stop(t)
	}
	for _, n := range c.Nodes {
		s, err := store.Open(store.Config{Dir: filepath.Join(n.DataDir, "fsm")})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		err = s.Dump(&b)
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b.String())
	}
	return out
}

// TestACLAttacksRefused replays the namespace attacks of issue 9 against a
// 3-member cluster of real latchd processes with mutual TLS and ACLs on
// (--tls-client-ca, so the default is deny; --admins ops). The attacker,
// mallory, has every right but admin on /work, where alice holds a lock,
// leads an election, holds a semaphore place and owns an ephemeral. Each
// attack must fail with a permission (or reserved-name) error that keeps
// its identity across the wire, and afterwards every member's state must
// be the same and carry no trace of mallory.
func TestACLAttacksRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	ca := newClientCA(t)
	c := proc.StartCluster(t, 3, "--tls-client-ca", ca.File, "--admins", "ops")
	c.WaitLeader(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Clients without a certificate cannot even connect where mTLS is
	// required.
	if cl, err := dialAs(t, c, ca, ""); err == nil {
		cl.Close()
		t.Fatal("a client without a certificate connected to a mutual-TLS cluster")
	}

	ops := mustDialAs(t, c, ca, "ops")
	waitEnforced(t, ops)
	if err := ops.SetACL(ctx,
		ACLRule{Identity: "alice", Prefix: "/work", Perms: namespace.PermRWCD},
		ACLRule{Identity: "mallory", Prefix: "/work", Perms: namespace.PermRWCD},
	); err != nil {
		t.Fatal(err)
	}
	alice := mustDialAs(t, c, ca, "alice")
	mallory := mustDialAs(t, c, ca, "mallory")

	// Without a rule, the default (deny) applies, and the error says who
	// lacks what.
	if _, err := mallory.Create(ctx, "/elsewhere", nil); !errors.Is(err, ErrPermissionDenied) ||
		!strings.Contains(err.Error(), "mallory") {
		t.Fatalf("create outside the rules = %v, want ErrPermissionDenied naming mallory", err)
	}
	if err := mallory.SetACL(ctx, ACLRule{Identity: "mallory", Prefix: "/", Perms: namespace.PermAll}); !errors.Is(err, ErrPermissionDenied) {
		t.Fatalf("mallory granting herself admin = %v", err)
	}

	// alice's state.
	mkdir(t, alice, "/work")
	lock := NewMutex(alice.Session(), "/work/job")
	if err := lock.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	elect := NewElection(alice.Session(), "/work/elect")
	if err := elect.Campaign(ctx, []byte("alice")); err != nil {
		t.Fatal(err)
	}
	sem := NewSemaphore(alice.Session(), "/work/sem", 2)
	if err := sem.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	eph, err := alice.Create(ctx, "/work/eph", []byte("alice's"), Ephemeral())
	if err != nil {
		t.Fatal(err)
	}
	lockNode := lockNodeOf(t, alice, "/work/job")
	electNode := lockNodeOf(t, alice, "/work/elect")

	denied := func(what string, err error, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Fatalf("%s = %v, want %v", what, err, want)
		}
	}
	// 1. Delete another identity's held lock node.
	denied("delete alice's held lock node", mallory.Delete(ctx, lockNode), ErrPermissionDenied)
	// 2. Delete its ephemerals.
	denied("delete alice's ephemeral", mallory.Delete(ctx, eph), ErrPermissionDenied)
	// 3. Set data on an election node so Leader() returns the intruder's value.
	_, err = mallory.Set(ctx, electNode, []byte("intruder"))
	denied("set alice's election node", err, ErrPermissionDenied)
	_, err = mallory.Multi(ctx, OpSet(electNode, []byte("intruder")))
	denied("set alice's election node in a multi", err, ErrPermissionDenied)
	// 4. Lock / (blocks every lock in the tree).
	denied("lock /", NewMutex(mallory.Session(), "/").TryLock(ctx), ErrPermissionDenied)
	// 5. Reserved-name poisoning.
	mkdir(t, mallory, "/work/p")
	_, err = mallory.Create(ctx, "/work/p/lock-x-0000000003", []byte("intruder"))
	denied("create a lock request name", err, ErrReservedName)
	denied("lock a lock request name", NewMutex(mallory.Session(), "/work/p/lock-x-0000000003").TryLock(ctx), ErrReservedName)
	// 6. Delete a semaphore holder's node.
	denied("delete alice's semaphore node", mallory.Delete(ctx, sem.Node()), ErrPermissionDenied)
	// Stealing by session: mallory names alice's session on her own
	// connection: the server refuses a session not attached to it.
	_, err = mallory.do(ctx, nil, &session.Request{Type: session.MsgDelete, Path: lockNode, Session: alice.Session().ID(), Version: namespace.AnyVersion})
	denied("delete naming alice's session", err, ErrUnknownSession)

	// Nothing changed for alice, as she sees it.
	select {
	case <-lock.Lost():
		t.Fatal("alice's lock was lost")
	case <-sem.Lost():
		t.Fatal("alice's semaphore place was lost")
	case <-elect.Lost():
		t.Fatal("alice's leadership was lost")
	default:
	}
	if ok, err := mallory.CheckSequencer(ctx, lock.Sequencer()); err != nil || !ok {
		t.Fatalf("alice's sequencer: %v %v", ok, err)
	}
	if v, _, err := NewElection(mallory.Session(), "/work/elect").Leader(ctx); err != nil || string(v) != "alice" {
		t.Fatalf("Leader() = %q, %v; want alice", v, err)
	}
	// Locks on /work/p still work (no poisoned name was left behind).
	for range 5 {
		m := NewMutex(mallory.Session(), "/work/p")
		if err := m.TryLock(ctx); err != nil {
			t.Fatalf("lock /work/p after the poisoning attempt: %v", err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Every member holds the same state, and it has alice's nodes and no
	// trace of mallory's writes.
	dumps := memberDumps(t, c)
	for i, d := range dumps {
		if d != dumps[0] {
			t.Fatalf("member %d's state differs from member 1's:\n%s\n---\n%s", i+1, d, dumps[0])
		}
	}
	for _, want := range []string{lockNode + " ", electNode + " ", sem.Node() + " ", eph + " ", `data="alice"`, `data="alice's"`} {
		if !strings.Contains(dumps[0], want) {
			t.Fatalf("state lacks %q:\n%s", want, dumps[0])
		}
	}
	for _, bad := range []string{"intruder", "lock-x-0000000003", "\n/lock-"} {
		if strings.Contains(dumps[0], bad) {
			t.Fatalf("state has %q:\n%s", bad, dumps[0])
		}
	}
}

func mustDialAs(t *testing.T, c *proc.Cluster, ca *clientCA, identity string) *Client {
	t.Helper()
	cl, err := dialAs(t, c, ca, identity)
	if err != nil {
		t.Fatalf("dial as %s: %v", identity, err)
	}
	return cl
}

// waitEnforced waits until the leader has bootstrapped the ACL rules.
func waitEnforced(t *testing.T, c *Client) {
	t.Helper()
	proc.Eventually(t, "ACLs bootstrapped", func() error {
		a, err := c.ACL(context.Background())
		if err == nil && !a.Enforced {
			err = fmt.Errorf("not enforced: %+v", a)
		}
		return err
	})
}

// lockNodeOf returns the granted request node of the lock on path.
func lockNodeOf(t *testing.T, c *Client, path string) string {
	t.Helper()
	q, err := c.LockQueue(context.Background(), path)
	if err != nil || len(q) == 0 || !q[0].Granted {
		t.Fatalf("queue of %s: %+v %v", path, q, err)
	}
	return q[0].Node
}

// TestAnonymousSessionFlood: one client opening 10,000 sessions without a
// certificate (the default per-host cap) is refused past the cap with an
// error naming it, and a client with a certificate still opens sessions.
// A real latchd --dev process (it verifies a client certificate when one
// is offered, without requiring one).
func TestAnonymousSessionFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	n := proc.NewNode(t, proc.Options{ID: "dev"})
	n.Args = []string{"--dev"}
	n.Start(t)
	n.WaitReady(t)
	certs, err := session.EnsureDevCerts(filepath.Join(n.DataDir, "tls"))
	if err != nil {
		t.Fatal(err)
	}
	dial := func(cert, key string) *Client {
		tlsConf, err := session.ClientTLS(certs.CA, cert, key)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cl, err := Dial(ctx, Config{Endpoints: []string{n.ClientAddr}, TLS: tlsConf, SessionTTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	flood := dial("", "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		opened  atomic.Int64
		refused atomic.Int64
		first   atomic.Value
		wg      sync.WaitGroup
	)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && opened.Load()+1 < 10000+50 && refused.Load() == 0 {
				_, err := flood.NewSession(ctx, 30*time.Second)
				if err == nil {
					opened.Add(1)
					continue
				}
				if errors.Is(err, ErrTooManySessions) {
					refused.Add(1)
					first.CompareAndSwap(nil, err.Error())
					return
				}
				t.Errorf("open: %v", err)
				return
			}
		}()
	}
	wg.Wait()
	// The default session of flood counts too. Exactly the cap, with 16
	// opening at once: an open that committed is counted once, as open,
	// from the moment the leader applies it (its reservation ends there).
	if got := opened.Load() + 1; refused.Load() == 0 || got != 10000 {
		t.Fatalf("anonymous sessions opened: %d, refusals %d; want the cap, 10000", got, refused.Load())
	}
	if msg, _ := first.Load().(string); !strings.Contains(msg, "--max-anonymous-sessions-per-host") {
		t.Fatalf("refusal %q does not name the cap", msg)
	}
	certFile, keyFile, err := certs.Client("certified")
	if err != nil {
		t.Fatal(err)
	}
	certified := dial(certFile, keyFile)
	if _, err := certified.NewSession(ctx, 5*time.Second); err != nil {
		t.Fatalf("a client with a certificate after the flood: %v", err)
	}
}
