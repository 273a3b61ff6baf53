package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/namespace/store"
	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// The attacks of issue 9 on member traffic, against real latchd processes
// started as the README says (a cluster CA, member certificates, an admin
// identity). Each is refused with a clear error and changes no member's
// state: the members' namespace dumps are compared after the attacks.

// procClient dials c's members as a client with no certificate.
func procClient(t *testing.T, c *proc.Cluster) *client.Client {
	t.Helper()
	conf, err := session.ClientTLS(c.Certs.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), proc.WaitTimeout)
	defer cancel()
	cl, err := client.Dial(ctx, client.Config{Endpoints: c.ClientAddrs(), TLS: conf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// settle writes /settled through the leader and waits until every member
// applied it, so no member holds a write the others lack.
func settle(t *testing.T, c *proc.Cluster, cl *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), proc.WaitTimeout)
	defer cancel()
	_, err := cl.Set(ctx, "/settled", []byte(time.Now().String()), client.WithVersion(namespace.AnyVersion))
	if errors.Is(err, client.ErrNoNode) {
		_, err = cl.Create(ctx, "/settled", nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	waitSame(t, c)
}

// waitSame waits until every member has applied what the leader applied,
// twice in a row at the same index, and knows every member's addresses.
func waitSame(t *testing.T, c *proc.Cluster) {
	t.Helper()
	deadline := time.Now().Add(proc.WaitTimeout)
	var last uint64
	for {
		lst, err := c.Nodes[c.WaitLeader(t)].Status()
		done := err == nil && lst.AppliedIndex == last
		for _, nd := range c.Nodes {
			st, err := nd.Status()
			done = done && err == nil && st.AppliedIndex == lst.AppliedIndex && len(st.Members) == len(c.Nodes)
			for _, m := range st.Members {
				done = done && m.ClientAddr != ""
			}
		}
		if done {
			return
		}
		last = lst.AppliedIndex
		if time.Now().After(deadline) {
			t.Fatal("members never applied the same index")
		}
		time.Sleep(50 * time.Millisecond) // polling interval of a condition with a deadline
	}
}

// stopAndDump stops every member (SIGTERM) and returns each one's
// namespace dump, read from its data directory.
func stopAndDump(t *testing.T, c *proc.Cluster) []string {
	t.Helper()
	var dumps []string
	for _, nd := range c.Nodes {
		if code := nd.Stop(t); code != 0 {
			t.Fatalf("%s exited %d", nd.ID, code)
		}
		st, err := store.Open(store.Config{Dir: filepath.Join(nd.DataDir, "fsm")})
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		err = st.Dump(&b)
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		dumps = append(dumps, b.String())
	}
	return dumps
}

// sameDumps fails the test unless every dump equals the first and none
// mentions forbidden.
func sameDumps(t *testing.T, c *proc.Cluster, dumps []string, forbidden ...string) {
	t.Helper()
	for _, p := range dumpProblems(c, dumps, forbidden...) {
		t.Error(p)
	}
}

// dumpProblems lists how the dumps differ from the first, and which hold
// a forbidden string.
func dumpProblems(c *proc.Cluster, dumps []string, forbidden ...string) []string {
	var out []string
	for i, d := range dumps {
		if d != dumps[0] {
			out = append(out, fmt.Sprintf("%s's namespace differs from %s's:\n%s\n---\n%s", c.Nodes[i].ID, c.Nodes[0].ID, d, dumps[0]))
		}
		for _, f := range forbidden {
			if strings.Contains(d, f) {
				out = append(out, fmt.Sprintf("%s's namespace holds %q", c.Nodes[i].ID, f))
			}
		}
	}
	return out
}

// dialLayer is a raft stream layer of a forger: it dials with dial and
// accepts nothing.
type dialLayer struct {
	net.Listener
	dial func(addr string) (net.Conn, error)
}

func (l dialLayer) Dial(a raft.ServerAddress, _ time.Duration) (net.Conn, error) {
	return l.dial(string(a))
}

// forgeAppend sends follower f a forged AppendEntries over dial, as if
// from the leader: the follower's last entry as the previous one, then a
// create of /evil, committed.
func forgeAppend(t *testing.T, c *proc.Cluster, leader int, f *proc.Node, dial func(string) (net.Conn, error)) error {
	t.Helper()
	st, err := f.Status()
	if err != nil {
		t.Fatal(err)
	}
	data, err := namespace.EncodeEntry(&namespace.Entry{Time: time.Now().UnixNano(),
		Cmd: namespace.Command{Op: namespace.OpCreate, Path: "/evil", Data: []byte("outsider")}})
	if err != nil {
		t.Fatal(err)
	}
	req := &raft.AppendEntriesRequest{
		RPCHeader:         raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(c.Nodes[leader].ID), Addr: []byte(c.Nodes[leader].RaftAddr)},
		Term:              st.Term,
		PrevLogEntry:      st.LastLogIndex,
		PrevLogTerm:       st.Term,
		Entries:           []*raft.Log{{Index: st.LastLogIndex + 1, Term: st.Term, Type: raft.LogCommand, Data: data}},
		LeaderCommitIndex: st.LastLogIndex + 1,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	trans := raft.NewNetworkTransport(dialLayer{Listener: ln, dial: dial}, 1, 5*time.Second, io.Discard)
	defer trans.Close()
	var resp raft.AppendEntriesResponse
	if err := trans.AppendEntries(raft.ServerID(f.ID), raft.ServerAddress(f.RaftAddr), req, &resp); err != nil {
		return err
	}
	if !resp.Success {
		return fmt.Errorf("answered without success (term %d, last log %d)", resp.Term, resp.LastLog)
	}
	return nil
}

// tlsDial dials raft addresses with TLS presenting cert, trusting anyone.
func tlsDial(cert tls.Certificate) func(string) (net.Conn, error) {
	return func(addr string) (net.Conn, error) {
		d := &net.Dialer{Timeout: 2 * time.Second}
		return tls.DialWithDialer(d, "tcp", addr, &tls.Config{Certificates: []tls.Certificate{cert},
			InsecureSkipVerify: true, MinVersion: tls.VersionTLS13, NextProtos: []string{session.RaftALPN}})
	}
}

// A forged AppendEntries, sent to a follower's raft port from a fresh
// connection as plain TCP, with a client certificate of the cluster CA, and
// with a member certificate of another CA, is refused by the handshake,
// and no member's state changes.
func TestForgedAppendEntriesRefused(t *testing.T) {
	c := proc.StartCluster(t, 3)
	leader := c.WaitLeader(t)
	cl := procClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), proc.WaitTimeout)
	defer cancel()
	if _, err := cl.Create(ctx, "/seed", []byte("s")); err != nil {
		t.Fatal(err)
	}
	settle(t, c, cl)
	f := c.Nodes[(leader+1)%3]

	malCert, malKey, err := c.Certs.Client("mallory")
	if err != nil {
		t.Fatal(err)
	}
	malPair, err := tls.LoadX509KeyPair(malCert, malKey)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	otherCA, err := session.NewCA("forger's CA", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	fake, err := otherCA.IssueMember(c.Nodes[leader].ID, []string{"127.0.0.1"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	fakePair, err := fake.TLS()
	if err != nil {
		t.Fatal(err)
	}
	for name, dial := range map[string]func(string) (net.Conn, error){
		"plain TCP":                              func(addr string) (net.Conn, error) { return net.DialTimeout("tcp", addr, 2*time.Second) },
		"a client certificate of the cluster CA": tlsDial(malPair),
		"a member certificate of another CA":     tlsDial(fakePair),
	} {
		if err := forgeAppend(t, c, leader, f, dial); err == nil {
			t.Errorf("forged AppendEntries over %s: accepted", name)
		} else {
			t.Logf("forged AppendEntries over %s: %v", name, err)
		}
	}
	if !strings.Contains(f.Logs(), "raft connection refused") {
		t.Error("the follower did not log the refused raft connections")
	}
	code, body, err := f.Get("/metrics")
	if err != nil || code != http.StatusOK || !strings.Contains(body, `latch_member_traffic_refused_total{member="`+f.ID+`",what="raft"} 3`) {
		t.Errorf("refused raft connections not counted (%d, %v)", code, err)
	}
	settle(t, c, cl)
	cl.Close()
	waitSame(t, c)
	sameDumps(t, c, stopAndDump(t, c), "/evil", "outsider")
}

// The same forgery with a member certificate of the cluster CA (a stolen
// member key) gets through: the follower keeps /evil, which the others
// lack. This shows the forged request is one raft accepts, so its refusal
// above is the handshake's doing, and that the dump check catches the
// change.
func TestForgedAppendEntriesCheckCatchesAMemberKey(t *testing.T) {
	c := proc.StartCluster(t, 3)
	leader := c.WaitLeader(t)
	cl := procClient(t, c)
	settle(t, c, cl)
	f := c.Nodes[(leader+1)%3]
	cert, key, err := c.Certs.Member(c.Nodes[leader].ID)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := forgeAppend(t, c, leader, f, tlsDial(pair)); err != nil {
		t.Fatalf("forgery with a member key: %v", err)
	}
	settle(t, c, cl)
	cl.Close()
	waitSame(t, c)
	if p := dumpProblems(c, stopAndDump(t, c), "/evil"); len(p) == 0 {
		t.Fatal("the dump check saw no change after a forgery that got through")
	} else {
		t.Logf("caught: %s", p[len(p)-1])
	}
}

// adminAs is an admin endpoint client presenting conf (nil: no
// certificate, the cluster CA trusted).
func adminAs(t *testing.T, c *proc.Cluster, conf *tls.Config) *adminapi.Client {
	t.Helper()
	if conf == nil {
		var err error
		if conf, err = session.AdminTLS(c.Certs.CA, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	a := adminapi.NewClient(conf, 10*time.Second)
	t.Cleanup(a.CloseIdleConnections)
	return a
}

func tlsAs(t *testing.T, c *proc.Cluster, cert, key string) *tls.Config {
	t.Helper()
	conf, err := session.AdminTLS(c.Certs.CA, cert, key)
	if err != nil {
		t.Fatal(err)
	}
	return conf
}

// wantWire fails unless err is an admin answer with HTTP status status
// whose wire code turns back into sentinel (its identity across the wire).
func wantWire(t *testing.T, what string, err error, status int, sentinel error) {
	t.Helper()
	var re *adminapi.ReplyError
	if !errors.As(err, &re) || re.Status != status || !errors.Is(session.Code(re.Reply.WireCode).Err(re.Reply.Error), sentinel) {
		t.Errorf("%s: %v; want %d %v", what, err, status, sentinel)
		return
	}
	t.Logf("%s: %d %s", what, re.Status, re.Reply.Error)
}

// Unauthenticated and under-privileged admin requests: three fake voters,
// removing a real member, an update_only that re-points a member's
// addresses, a snapshot loop and fault injection, sent to the leader and
// to a follower (which must refuse, not forward). Each is refused, and
// neither the membership nor any member's namespace changes.
func TestAdminAttacksRefused(t *testing.T) {
	c := proc.StartCluster(t, 3, "--fault-injection")
	leader := c.WaitLeader(t)
	cl := procClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*proc.WaitTimeout)
	defer cancel()
	if _, err := cl.Create(ctx, "/seed", []byte("s")); err != nil {
		t.Fatal(err)
	}
	settle(t, c, cl)
	before, err := c.Nodes[leader].Status()
	if err != nil {
		t.Fatal(err)
	}

	anon := adminAs(t, c, nil)
	malCert, malKey, err := c.Certs.Client("mallory")
	if err != nil {
		t.Fatal(err)
	}
	mallory := adminAs(t, c, tlsAs(t, c, malCert, malKey))
	n3Cert, n3Key, err := c.Certs.Member("n3")
	if err != nil {
		t.Fatal(err)
	}
	asN3 := adminAs(t, c, tlsAs(t, c, n3Cert, n3Key))
	adminConf, err := proc.AdminTLS(c.Certs)
	if err != nil {
		t.Fatal(err)
	}
	admin := adminAs(t, c, adminConf)
	post := func(a *adminapi.Client, nd *proc.Node, path string, body any) error {
		return a.Do(ctx, http.MethodPost, nd.HTTPAddr, path, body, nil)
	}
	fakeAddrs := proc.FreeAddrs(t, 3)
	for _, nd := range []*proc.Node{c.Nodes[leader], c.Nodes[(leader+1)%3]} {
		for i, a := range fakeAddrs {
			id := "ghost" + string(rune('1'+i))
			join := map[string]any{"id": id, "raft_addr": a, "client_addr": a, "http_addr": a}
			wantWire(t, "join of a fake voter without a certificate via "+nd.ID, post(anon, nd, "/v1/join", join), http.StatusForbidden, session.ErrAdminDenied)
			wantWire(t, "join of a fake voter as a client via "+nd.ID, post(mallory, nd, "/v1/join", join), http.StatusForbidden, session.ErrAdminDenied)
			wantWire(t, "join of a fake voter as member n3 via "+nd.ID, post(asN3, nd, "/v1/join", join), http.StatusForbidden, session.ErrAdminDenied)
		}
		victim := c.Nodes[(leader+1)%3]
		remove := map[string]any{"id": victim.ID}
		wantWire(t, "remove without a certificate via "+nd.ID, post(anon, nd, "/v1/remove", remove), http.StatusForbidden, session.ErrAdminDenied)
		wantWire(t, "remove as a client via "+nd.ID, post(mallory, nd, "/v1/remove", remove), http.StatusForbidden, session.ErrAdminDenied)
		if victim.ID != "n3" {
			wantWire(t, "remove of another member as member n3 via "+nd.ID, post(asN3, nd, "/v1/remove", remove), http.StatusForbidden, session.ErrAdminDenied)
		}
		hijack := map[string]any{"id": victim.ID, "raft_addr": victim.RaftAddr, "client_addr": "127.0.0.1:1", "http_addr": "127.0.0.1:2", "update_only": true}
		wantWire(t, "update_only redirect hijack without a certificate via "+nd.ID, post(anon, nd, "/v1/join", hijack), http.StatusForbidden, session.ErrAdminDenied)
		if victim.ID != "n3" {
			wantWire(t, "update_only redirect hijack as member n3 via "+nd.ID, post(asN3, nd, "/v1/join", hijack), http.StatusForbidden, session.ErrAdminDenied)
		}
		for range 3 {
			wantWire(t, "snapshot without a certificate via "+nd.ID, post(anon, nd, "/v1/snapshot", struct{}{}), http.StatusForbidden, session.ErrAdminDenied)
		}
		wantWire(t, "fault injection without a certificate via "+nd.ID, post(anon, nd, "/v1/faults", map[string]any{"block": []string{victim.RaftAddr}}), http.StatusForbidden, session.ErrAdminDenied)
		wantWire(t, "backup download as a client via "+nd.ID, mallory.Do(ctx, http.MethodGet, nd.HTTPAddr, "/v1/snapshot/download", nil, nil), http.StatusForbidden, session.ErrAdminDenied)
	}
	// Even an admin cannot take a live member's id or raft address
	// without asking to replace it.
	other := c.Nodes[(leader+2)%3]
	wantWire(t, "admin join with a live member's id", post(admin, c.Nodes[leader], "/v1/join",
		map[string]any{"id": other.ID, "raft_addr": fakeAddrs[0], "client_addr": fakeAddrs[0], "http_addr": fakeAddrs[0]}), http.StatusConflict, session.ErrMemberExists)
	wantWire(t, "admin join at a live member's raft address", post(admin, c.Nodes[leader], "/v1/join",
		map[string]any{"id": "ghost9", "raft_addr": other.RaftAddr, "client_addr": fakeAddrs[0], "http_addr": fakeAddrs[0]}), http.StatusConflict, session.ErrMemberExists)
	// A snapshot loop by an admin writes one snapshot, then waits.
	if err := post(admin, c.Nodes[leader], "/v1/snapshot", struct{}{}); err != nil {
		t.Fatalf("admin snapshot: %v", err)
	}
	for range 5 {
		wantWire(t, "admin snapshot loop", post(admin, c.Nodes[leader], "/v1/snapshot", struct{}{}), http.StatusTooManyRequests, session.ErrSnapshotTooSoon)
	}

	after, err := c.Nodes[c.WaitLeader(t)].Status()
	if err != nil {
		t.Fatal(err)
	}
	for i := range before.Members {
		before.Members[i].Leader = false
	}
	for i := range after.Members {
		after.Members[i].Leader = false
	}
	b1, _ := json.Marshal(before.Members)
	b2, _ := json.Marshal(after.Members)
	if !bytes.Equal(b1, b2) {
		t.Errorf("membership changed:\n%s\n%s", b1, b2)
	}
	for _, nd := range c.Nodes {
		st, err := nd.Status()
		if err != nil || len(st.Members) != 3 {
			t.Errorf("%s: %v members %+v", nd.ID, err, st.Members)
		}
		wantWire(t, nd.ID+" GET /v1/faults without a certificate", anon.Do(ctx, http.MethodGet, nd.HTTPAddr, "/v1/faults", nil, nil), http.StatusForbidden, session.ErrAdminDenied)
	}
	settle(t, c, cl)
	cl.Close()
	waitSame(t, c)
	sameDumps(t, c, stopAndDump(t, c), "ghost")
}

// A cluster that lost quorum for good (two of three members destroyed)
// comes back on the survivor with latchd --recover, keeping its data; it
// then runs without the flag, and takes writes.
func TestRecoverLostQuorum(t *testing.T) {
	c := proc.StartCluster(t, 3)
	c.WaitLeader(t)
	cl := procClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*proc.WaitTimeout)
	defer cancel()
	if _, err := cl.Create(ctx, "/before", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	settle(t, c, cl)
	cl.Close()
	survivor := c.Nodes[0]
	for _, nd := range c.Nodes[1:] {
		nd.Kill(t)
	}
	// Alone, the survivor elects no leader: that is the lost quorum.
	if code := survivor.Stop(t); code != 0 {
		t.Fatalf("survivor exited %d", code)
	}
	plain := survivor.Args
	survivor.Args = append(append([]string{}, plain...), "--recover", survivor.ID+"="+survivor.RaftAddr)
	survivor.Start(t)
	survivor.WaitReady(t)
	if !strings.Contains(survivor.Logs(), "raft configuration recovered") {
		t.Fatal("the survivor did not log its recovery")
	}
	survivor.Stop(t)
	survivor.Args = plain
	survivor.Start(t)
	survivor.WaitReady(t)
	st, err := survivor.Status()
	voters := 0
	for _, m := range st.Members {
		if m.Suffrage == "voter" {
			voters++
		}
	}
	// The lost members' metadata stays until `latch member remove`.
	if err != nil || st.State != "Leader" || voters != 1 {
		t.Fatalf("after recovery: %+v, %v", st, err)
	}

	conf, err := session.ClientTLS(c.Certs.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	one, err := client.Dial(ctx, client.Config{Endpoints: []string{survivor.ClientAddr}, TLS: conf})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	if data, _, err := one.Get(ctx, "/before"); err != nil || string(data) != "kept" {
		t.Fatalf("/before after recovery: %q, %v", data, err)
	}
	if _, err := one.Create(ctx, "/after", nil); err != nil {
		t.Fatalf("write after recovery: %v", err)
	}
}
