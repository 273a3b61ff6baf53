package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/latch-io/latch/namespace"
	"github.com/latch-io/latch/server"
	"github.com/latch-io/latch/server/servertest"
	"github.com/latch-io/latch/session"
)

// frontCluster is an in-process cluster reached the way clients reach it:
// QUIC with TLS on loopback, raw protocol frames (no client package).
type frontCluster struct {
	*servertest.Cluster
	t   testing.TB
	tls *tls.Config
}

// wireCtx bounds one exchange of a test.
func wireCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), servertest.WaitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func startFront(t testing.TB, n int, configure func(i int, cfg *server.Config)) *frontCluster {
	t.Helper()
	return startFrontWith(t, n, servertest.Options{Configure: configure})
}

// startFrontWith is startFront with every servertest option: an
// in-memory raft network, a clock the test moves.
func startFrontWith(t testing.TB, n int, opts servertest.Options) *frontCluster {
	t.Helper()
	c := servertest.StartCluster(t, n, &opts)
	tlsConf, err := session.ClientTLS(c.Certs().CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	fc := &frontCluster{Cluster: c, t: t, tls: tlsConf}
	fc.WaitLeader()
	fc.WaitMembers() // followers name the leader's client address
	return fc
}

// dialRaw connects to member i without saying Hello.
func (fc *frontCluster) dialRaw(i int) *session.Conn {
	fc.t.Helper()
	conn, err := session.Dial(wireCtx(fc.t), fc.Server(i).ClientAddr(), fc.tls, session.Config{})
	if err != nil {
		fc.t.Fatalf("dial n%d: %v", i+1, err)
	}
	fc.t.Cleanup(func() { conn.Close() })
	return conn
}

// dial connects to member i and says Hello.
func (fc *frontCluster) dial(i int) *session.Conn {
	fc.t.Helper()
	conn := fc.dialRaw(i)
	hello, err := session.Hello(wireCtx(fc.t), conn, "test")
	if err != nil {
		fc.t.Fatalf("hello n%d: %v", i+1, err)
	}
	if hello.ServerID != fc.Server(i).ID() || hello.Features&session.FeatureKeepAliveBatch == 0 {
		fc.t.Fatalf("hello answer %+v", hello)
	}
	return conn
}

// call sends req and returns the answer, failing the test on a transport
// error (an error answer is returned for the test to check).
func call(t testing.TB, conn *session.Conn, req *session.Request) *session.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), servertest.WaitTimeout)
	defer cancel()
	resp, err := session.RoundTrip(ctx, conn, req)
	if err != nil {
		t.Fatalf("%v %s: transport: %v", req.Type, req.Path, err)
	}
	return resp
}

// ok is call that also fails the test on an error answer.
func ok(t testing.TB, conn *session.Conn, req *session.Request) *session.Response {
	t.Helper()
	resp := call(t, conn, req)
	if err := resp.Err(); err != nil {
		t.Fatalf("%v %s: %v", req.Type, req.Path, err)
	}
	return resp
}

// fails is call that expects an error answer matching want.
func fails(t *testing.T, conn *session.Conn, req *session.Request, want error) *session.Response {
	t.Helper()
	resp := call(t, conn, req)
	if err := resp.Err(); !errors.Is(err, want) {
		t.Fatalf("%v %s: err = %v, want %v", req.Type, req.Path, err, want)
	}
	return resp
}

func openSession(t *testing.T, conn *session.Conn, ttl time.Duration) *session.Response {
	t.Helper()
	resp := ok(t, conn, &session.Request{Type: session.MsgOpenSession, TTLMillis: ttl.Milliseconds()})
	if resp.Session == 0 || len(resp.Secret) != 16 || resp.TTLMillis != ttl.Milliseconds() {
		t.Fatalf("open session answer %+v", resp)
	}
	return resp
}

func follower(fc *frontCluster, leader int) int { return (leader + 1) % fc.N() }

func TestFrontSessionLifecycle(t *testing.T) {
	fc := startFront(t, 3, nil)
	leader := fc.WaitLeader()
	conn := fc.dial(leader)

	sess := openSession(t, conn, 5*time.Second)
	create := ok(t, conn, &session.Request{Type: session.MsgCreate, Session: sess.Session, Path: "/eph",
		Data: []byte("x"), Flags: namespace.FlagEphemeral})
	if create.Path != "/eph" || create.Stat.EphemeralOwner != sess.Session || create.Rev <= sess.Rev {
		t.Fatalf("create answer %+v", create)
	}
	if ka := ok(t, conn, &session.Request{Type: session.MsgKeepAlive, Session: sess.Session}); ka.TTLMillis != 5000 {
		t.Fatalf("keepalive TTL %d", ka.TTLMillis)
	}

	// TTLs are clamped into the server's bounds.
	if r := ok(t, conn, &session.Request{Type: session.MsgOpenSession, TTLMillis: 36_000_000}); r.TTLMillis != namespace.DefaultLimits().MaxSessionTTLMillis {
		t.Fatalf("10h TTL granted as %dms", r.TTLMillis)
	}
	if r := ok(t, conn, &session.Request{Type: session.MsgOpenSession, TTLMillis: 1}); r.TTLMillis != namespace.DefaultLimits().MinSessionTTLMillis {
		t.Fatalf("1ms TTL granted as %dms", r.TTLMillis)
	}
	fails(t, conn, &session.Request{Type: session.MsgOpenSession, TTLMillis: -5}, namespace.ErrBadCommand)

	// Another connection: the session id alone gets nothing.
	other := fc.dial(leader)
	fails(t, other, &session.Request{Type: session.MsgKeepAlive, Session: sess.Session}, session.ErrUnknownSession)
	fails(t, other, &session.Request{Type: session.MsgCreate, Session: sess.Session, Path: "/steal",
		Flags: namespace.FlagEphemeral}, session.ErrUnknownSession)
	fails(t, other, &session.Request{Type: session.MsgCloseSession, Session: sess.Session}, session.ErrUnknownSession)
	wrong := append([]byte(nil), sess.Secret...)
	wrong[0] ^= 1
	fails(t, other, &session.Request{Type: session.MsgResumeSession, Session: sess.Session, Secret: wrong}, session.ErrBadSecret)
	fails(t, other, &session.Request{Type: session.MsgResumeSession, Session: sess.Session}, session.ErrBadSecret)
	fails(t, other, &session.Request{Type: session.MsgResumeSession, Session: 999999, Secret: sess.Secret}, session.ErrSessionExpired)
	// With the secret it is attached and usable there.
	if r := ok(t, other, &session.Request{Type: session.MsgResumeSession, Session: sess.Session, Secret: sess.Secret}); r.TTLMillis != 5000 {
		t.Fatalf("resume answer %+v", r)
	}
	ok(t, other, &session.Request{Type: session.MsgKeepAlive, Session: sess.Session})

	// A batched keepalive answers per session.
	second := openSession(t, conn, 2*time.Second)
	ka := ok(t, conn, &session.Request{Type: session.MsgKeepAlive, Session: sess.Session,
		Sessions: []uint64{second.Session, 424242}})
	if len(ka.KeepAlives) != 3 || ka.KeepAlives[0].TTLMillis != 5000 || ka.KeepAlives[1].TTLMillis != 2000 ||
		!errors.Is(ka.KeepAlives[2].Err(), session.ErrUnknownSession) {
		t.Fatalf("batched keepalive answer %+v", ka.KeepAlives)
	}

	// Closing deletes the ephemeral at once; the session is gone for both
	// connections.
	closed := ok(t, other, &session.Request{Type: session.MsgCloseSession, Session: sess.Session})
	get := fails(t, conn, &session.Request{Type: session.MsgGet, Path: "/eph"}, namespace.ErrNoNode)
	_ = get
	if closed.Rev <= create.Rev {
		t.Fatalf("close rev %d not after create rev %d", closed.Rev, create.Rev)
	}
	fails(t, conn, &session.Request{Type: session.MsgKeepAlive, Session: sess.Session}, session.ErrSessionExpired)
	fails(t, conn, &session.Request{Type: session.MsgResumeSession, Session: sess.Session, Secret: sess.Secret}, session.ErrSessionExpired)
	fails(t, conn, &session.Request{Type: session.MsgCreate, Session: sess.Session, Path: "/eph2",
		Flags: namespace.FlagEphemeral}, namespace.ErrNoSession)
}

func TestFrontReadsAndWrites(t *testing.T) {
	fc := startFront(t, 3, nil)
	leader := fc.WaitLeader()
	fol := follower(fc, leader)
	conn := fc.dial(leader)
	fconn := fc.dial(fol)

	// Writes and linearizable reads at the leader.
	cr := ok(t, conn, &session.Request{Type: session.MsgCreate, Path: "/a", Data: []byte("1")})
	got := ok(t, conn, &session.Request{Type: session.MsgGet, Path: "/a"})
	if string(got.Data) != "1" || got.Rev < cr.Rev || got.Stat.CreateRev != cr.Rev {
		t.Fatalf("get after create: %+v (create rev %d)", got, cr.Rev)
	}
	for i := range 5 {
		set := ok(t, conn, &session.Request{Type: session.MsgSet, Path: "/a", Data: []byte(fmt.Sprint(i)), Version: int64(i)})
		got := ok(t, conn, &session.Request{Type: session.MsgGet, Path: "/a"})
		if string(got.Data) != fmt.Sprint(i) || got.Rev < set.Rev {
			t.Fatalf("get after set %d: %q at rev %d (set rev %d)", i, got.Data, got.Rev, set.Rev)
		}
	}
	fails(t, conn, &session.Request{Type: session.MsgSet, Path: "/a", Version: 0}, namespace.ErrBadVersion)
	ok(t, conn, &session.Request{Type: session.MsgCreate, Path: "/a/b"})
	ok(t, conn, &session.Request{Type: session.MsgCreate, Path: "/a/c"})
	ch := ok(t, conn, &session.Request{Type: session.MsgChildren, Path: "/a", Limit: 1})
	if len(ch.Names) != 1 || ch.Names[0] != "b" || !ch.More {
		t.Fatalf("children page %+v", ch)
	}
	ch = ok(t, conn, &session.Request{Type: session.MsgChildren, Path: "/a", After: "b"})
	if len(ch.Names) != 1 || ch.Names[0] != "c" || ch.More {
		t.Fatalf("children second page %+v", ch)
	}
	if ex := ok(t, conn, &session.Request{Type: session.MsgExists, Path: "/nope"}); ex.Exists {
		t.Fatal("exists /nope")
	}
	if st := ok(t, conn, &session.Request{Type: session.MsgStat, Path: "/a"}); st.Stat.NumChildren != 2 || st.Stat.Version != 5 {
		t.Fatalf("stat %+v", st.Stat)
	}
	fails(t, conn, &session.Request{Type: session.MsgDelete, Path: "/a", Version: namespace.AnyVersion}, namespace.ErrNotEmpty)
	fails(t, conn, &session.Request{Type: session.MsgGet, Path: "bad//path"}, namespace.ErrBadPath)
	fails(t, conn, &session.Request{Type: session.MsgCreate, Path: "/big", Data: make([]byte, 64<<10+1)}, namespace.ErrDataTooLarge)
	// A largest value goes through the flow-control windows both ways.
	big := bytes.Repeat([]byte("0123456789abcdef"), 64<<10/16)
	ok(t, conn, &session.Request{Type: session.MsgCreate, Path: "/big", Data: big})
	if got := ok(t, conn, &session.Request{Type: session.MsgGet, Path: "/big"}); !bytes.Equal(got.Data, big) {
		t.Fatalf("a 64 KiB value came back as %d bytes", len(got.Data))
	}

	// Multi: all or nothing, with per-op results.
	m := ok(t, conn, &session.Request{Type: session.MsgMulti, Ops: []session.Op{
		{Type: namespace.OpCreate, Path: "/m"},
		{Type: namespace.OpSet, Path: "/m", Data: []byte("z"), Version: 0},
		{Type: namespace.OpCheck, Path: "/a", Version: 5},
	}})
	if len(m.Results) != 3 || m.Results[0].Path != "/m" || m.Results[1].Stat.Version != 1 {
		t.Fatalf("multi results %+v", m.Results)
	}
	bad := fails(t, conn, &session.Request{Type: session.MsgMulti, Ops: []session.Op{
		{Type: namespace.OpCreate, Path: "/n"},
		{Type: namespace.OpDelete, Path: "/missing", Version: namespace.AnyVersion},
	}}, namespace.ErrNoNode)
	if len(bad.Results) != 2 || bad.Results[0].Code != session.CodeOK || !errors.Is(bad.Results[1].Err(), namespace.ErrNoNode) {
		t.Fatalf("failed multi results %+v", bad.Results)
	}
	fails(t, conn, &session.Request{Type: session.MsgGet, Path: "/n"}, namespace.ErrNoNode)

	// A follower redirects writes, linearizable reads, syncs and session
	// requests to the leader's client address.
	leaderAddr := fc.Server(leader).ClientAddr()
	for _, req := range []*session.Request{
		{Type: session.MsgCreate, Path: "/f"},
		{Type: session.MsgGet, Path: "/a"},
		{Type: session.MsgSync},
		{Type: session.MsgOpenSession, TTLMillis: 1000},
	} {
		resp := fails(t, fconn, req, session.ErrNotLeader)
		if resp.Leader != leaderAddr {
			t.Fatalf("%v on a follower: leader %q, want %q", req.Type, resp.Leader, leaderAddr)
		}
	}
	// Stale reads are served by any member from its own state.
	sync := ok(t, conn, &session.Request{Type: session.MsgSync})
	fc.WaitApplied(sync.Rev)
	stale := ok(t, fconn, &session.Request{Type: session.MsgGet, Path: "/m", Stale: true})
	if string(stale.Data) != "z" || stale.Rev < m.Rev {
		t.Fatalf("stale get on a follower: %+v", stale)
	}

	// Membership and status.
	mem := ok(t, fconn, &session.Request{Type: session.MsgMembers})
	if len(mem.Members) != 3 || mem.Leader != leaderAddr {
		t.Fatalf("members %+v leader %q", mem.Members, mem.Leader)
	}
	st := ok(t, conn, &session.Request{Type: session.MsgStatus})
	if st.Status == nil || st.Status.ID != fc.Server(leader).ID() || st.Status.State != "Leader" || st.Status.AppliedIndex < m.Rev {
		t.Fatalf("status %+v", st.Status)
	}
}

// TestHandshakesCounted checks latch_client_handshakes_total: a client
// whose config keeps tickets resumes its session on a later connection,
// and the member counts every connection once, as resumed or full.
func TestHandshakesCounted(t *testing.T) {
	fc := startFront(t, 1, nil)
	s := fc.Server(0)
	dials := 0
	servertest.Eventually(t, "a resumed connection", func() error {
		conn := fc.dial(0)
		dials++
		if !conn.ConnectionState().TLS.DidResume {
			return fmt.Errorf("connection %d: full handshake", dials)
		}
		return nil
	})
	series := `latch_client_handshakes_total{member="` + s.ID() + `",resumed="%s"}`
	full := metricValue(t, fc.Cluster, s, fmt.Sprintf(series, "false"))
	resumed := metricValue(t, fc.Cluster, s, fmt.Sprintf(series, "true"))
	if full < 1 || resumed < 1 || int(full+resumed) != dials {
		t.Fatalf("%d connections counted as %v full and %v resumed", dials, full, resumed)
	}
}
