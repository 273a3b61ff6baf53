package client

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestNamespaceAPI runs every namespace call and its errors over real QUIC
// against a 3-member cluster.
func TestNamespaceAPI(t *testing.T) {
	tc := startCluster(t, 3, clusterOptions{childrenPage: 3})
	c := tc.dial(5 * time.Second)
	ctx := testCtx(t)

	// Create.
	if p, err := c.Create(ctx, "/app", []byte("v0")); err != nil || p != "/app" {
		t.Fatalf("create /app: %q %v", p, err)
	}
	if _, err := c.Create(ctx, "/app", nil); !errors.Is(err, ErrNodeExists) {
		t.Fatalf("create twice: %v", err)
	}
	if _, err := c.Create(ctx, "/nope/child", nil); !errors.Is(err, ErrNoNode) {
		t.Fatalf("create without parent: %v", err)
	}
	if _, err := c.Create(ctx, "bad//path", nil); !errors.Is(err, ErrBadPath) {
		t.Fatalf("create bad path: %v", err)
	}
	seq1, err := c.Create(ctx, "/app/job-", nil, Sequential())
	if err != nil {
		t.Fatal(err)
	}
	seq2, err := c.Create(ctx, "/app/job-", nil, Sequential())
	if err != nil {
		t.Fatal(err)
	}
	if len(seq1) != len("/app/job-")+10 || seq2 <= seq1 {
		t.Fatalf("sequential paths %q then %q", seq1, seq2)
	}
	eph, err := c.Create(ctx, "/app/eph", []byte("e"), Ephemeral())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, eph+"/child", nil); !errors.Is(err, ErrEphemeralParent) {
		t.Fatalf("child of an ephemeral: %v", err)
	}

	// Get, Stat, Exists.
	data, st, err := c.Get(ctx, "/app")
	if err != nil || string(data) != "v0" || st.Version != 0 || st.NumChildren != 3 {
		t.Fatalf("get /app: %q %+v %v", data, st, err)
	}
	if _, _, err := c.Get(ctx, "/missing"); !errors.Is(err, ErrNoNode) {
		t.Fatalf("get missing: %v", err)
	}
	if _, err := c.Stat(ctx, "/missing"); !errors.Is(err, ErrNoNode) {
		t.Fatalf("stat missing: %v", err)
	}
	est, err := c.Stat(ctx, eph)
	if err != nil || est.EphemeralOwner != c.Session().ID() {
		t.Fatalf("stat ephemeral: %+v %v (session %d)", est, err, c.Session().ID())
	}
	if ok, _, err := c.Exists(ctx, "/missing"); ok || err != nil {
		t.Fatalf("exists missing: %v %v", ok, err)
	}
	if ok, st, err := c.Exists(ctx, "/app"); !ok || err != nil || st.NumChildren != 3 {
		t.Fatalf("exists /app: %v %+v %v", ok, st, err)
	}

	// Set with and without versions.
	st, err = c.Set(ctx, "/app", []byte("v1"))
	if err != nil || st.Version != 1 {
		t.Fatalf("set: %+v %v", st, err)
	}
	if _, err := c.Set(ctx, "/app", []byte("v2"), WithVersion(0)); !errors.Is(err, ErrBadVersion) {
		t.Fatalf("set with a stale version: %v", err)
	}
	if st, err = c.Set(ctx, "/app", []byte("v2"), WithVersion(1)); err != nil || st.Version != 2 {
		t.Fatalf("set with the right version: %+v %v", st, err)
	}
	if _, err := c.Set(ctx, "/missing", nil); !errors.Is(err, ErrNoNode) {
		t.Fatalf("set missing: %v", err)
	}
	// A stale read after Sync sees the write.
	if err := c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if data, _, err := c.Get(ctx, "/app", Stale()); err != nil || string(data) != "v2" {
		t.Fatalf("stale get after sync: %q %v", data, err)
	}

	// Children, paged three at a time by the server.
	for i := range 7 {
		if _, err := c.Create(ctx, fmt.Sprintf("/list/%02d", i), nil); errors.Is(err, ErrNoNode) {
			if _, err := c.Create(ctx, "/list", nil); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Create(ctx, fmt.Sprintf("/list/%02d", i), nil); err != nil {
				t.Fatal(err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
	}
	all := []string{"00", "01", "02", "03", "04", "05", "06"}
	if names, err := c.Children(ctx, "/list"); err != nil || !slices.Equal(names, all) {
		t.Fatalf("children: %v %v", names, err)
	}
	if names, err := c.Children(ctx, "/list", After("01"), Limit(4)); err != nil || !slices.Equal(names, all[2:6]) {
		t.Fatalf("children after 01 limit 4: %v %v", names, err)
	}
	if names, err := c.Children(ctx, "/list", Stale()); err != nil || !slices.Equal(names, all) {
		t.Fatalf("stale children: %v %v", names, err)
	}
	if _, err := c.Children(ctx, "/missing"); !errors.Is(err, ErrNoNode) {
		t.Fatalf("children of missing: %v", err)
	}

	// Delete.
	if err := c.Delete(ctx, "/list"); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("delete non-empty: %v", err)
	}
	if err := c.Delete(ctx, "/list/00", WithVersion(5)); !errors.Is(err, ErrBadVersion) {
		t.Fatalf("delete with a wrong version: %v", err)
	}
	if err := c.Delete(ctx, "/list/00", WithVersion(0)); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "/list/00"); !errors.Is(err, ErrNoNode) {
		t.Fatalf("delete twice: %v", err)
	}
	if err := c.Delete(ctx, "/"); !errors.Is(err, ErrRootImmutable) {
		t.Fatalf("delete root: %v", err)
	}
	if _, err := c.Create(ctx, "/list/01/deep", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "/list", Recursive(), WithVersion(3)); !errors.Is(err, ErrBadVersion) {
		t.Fatalf("recursive delete with a wrong version: %v", err)
	}
	if names, _ := c.Children(ctx, "/list"); len(names) != 6 {
		t.Fatalf("a refused recursive delete deleted children: %v left", names)
	}
	if err := c.Delete(ctx, "/list", Recursive()); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := c.Exists(ctx, "/list"); ok {
		t.Fatal("/list survived a recursive delete")
	}
}

func TestMulti(t *testing.T) {
	tc := startCluster(t, 3, clusterOptions{})
	c := tc.dial(5 * time.Second)
	ctx := testCtx(t)

	res, err := c.Multi(ctx,
		OpCreate("/m", []byte("x")),
		OpCreate("/m/e", nil, Ephemeral()),
		OpCreate("/m/s-", nil, Sequential()),
		OpSet("/m", []byte("y"), WithVersion(0)),
		OpCheck("/m", 1),
	)
	if err != nil {
		t.Fatalf("multi: %v", err)
	}
	if len(res) != 5 || res[0].Path != "/m" || res[2].Path != "/m/s-0000000000" || res[3].Stat.Version != 1 {
		t.Fatalf("multi results %+v", res)
	}
	if st, err := c.Stat(ctx, "/m/e"); err != nil || st.EphemeralOwner != c.Session().ID() {
		t.Fatalf("ephemeral from multi: %+v %v", st, err)
	}

	// All or nothing: the failing op's error comes back, nothing applied.
	res, err = c.Multi(ctx,
		OpCreate("/m/new", nil),
		OpDelete("/m/e"),
		OpSet("/m", []byte("z"), WithVersion(7)),
	)
	if !errors.Is(err, ErrBadVersion) {
		t.Fatalf("failing multi: %v", err)
	}
	if len(res) != 3 || !errors.Is(res[2].Err, ErrBadVersion) {
		t.Fatalf("failing multi results %+v", res)
	}
	if ok, _, _ := c.Exists(ctx, "/m/new"); ok {
		t.Fatal("a failed multi created /m/new")
	}
	if ok, _, _ := c.Exists(ctx, "/m/e"); !ok {
		t.Fatal("a failed multi deleted /m/e")
	}
	if _, err := c.Multi(ctx, OpDelete("/m", Recursive())); !errors.Is(err, ErrBadOption) {
		t.Fatalf("recursive delete in a multi: %v", err)
	}

	// A session's Multi makes its ephemerals; they vanish with it.
	s, err := c.NewSession(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Multi(ctx, OpCreate("/m/s", nil, Ephemeral())); err != nil {
		t.Fatal(err)
	}
	if st, _ := c.Stat(ctx, "/m/s"); st.EphemeralOwner != s.ID() {
		t.Fatalf("owner %d, want %d", st.EphemeralOwner, s.ID())
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := c.Exists(ctx, "/m/s"); ok {
		t.Fatal("ephemeral outlived its closed session")
	}
}

func TestAdmin(t *testing.T) {
	tc := startCluster(t, 3, clusterOptions{})
	c := tc.dial(5 * time.Second)
	ctx := testCtx(t)
	leader := tc.WaitLeader()

	members, err := c.Members(ctx)
	if err != nil || len(members) != 3 {
		t.Fatalf("members: %+v %v", members, err)
	}
	for _, m := range members {
		if m.Leader != (m.ID == tc.Server(leader).ID()) {
			t.Fatalf("member %s leader=%v, cluster leader is %s", m.ID, m.Leader, tc.Server(leader).ID())
		}
		// Every member answers a direct status request.
		st, err := c.StatusOf(ctx, m.ClientAddr)
		if err != nil || st.ID != m.ID {
			t.Fatalf("status of %s at %s: %+v %v", m.ID, m.ClientAddr, st, err)
		}
	}
	st, leaderAddr, err := c.Status(ctx)
	if err != nil || st.ID != tc.Server(leader).ID() || leaderAddr != tc.endpoint(leader) || st.AppliedIndex == 0 {
		t.Fatalf("status: %+v %q %v", st, leaderAddr, err)
	}
	s2, err := c.NewSession(ctx, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[uint64]bool{}
	for _, s := range list {
		ids[s.ID] = true
	}
	if !ids[c.Session().ID()] || !ids[s2.ID()] {
		t.Fatalf("sessions %+v lack %d or %d", list, c.Session().ID(), s2.ID())
	}
}

// TestRedirectFromFollower dials a follower only: the client must follow
// the redirect to the leader and work normally.
func TestRedirectFromFollower(t *testing.T) {
	tc := startCluster(t, 3, clusterOptions{})
	leader := tc.WaitLeader()
	follower := (leader + 1) % 3
	c := tc.dial(5*time.Second, tc.endpoint(follower))
	ctx := testCtx(t)
	if _, err := c.Create(ctx, "/r", []byte("1")); err != nil {
		t.Fatal(err)
	}
	st, _, err := c.Status(ctx)
	if err != nil || st.ID != tc.Server(leader).ID() {
		t.Fatalf("the client talks to %+v, want the leader %s (err %v)", st, tc.Server(leader).ID(), err)
	}
}

// TestTxn: the compares pick the branch, the branch runs all or nothing,
// and the answer names the branch and carries each op's result.
func TestTxn(t *testing.T) {
	tc := startCluster(t, 3, clusterOptions{})
	c := tc.dial(5 * time.Second)
	ctx := testCtx(t)

	// Create if absent, else read it: the first creates, the second reads.
	for i, want := range []bool{true, false} {
		resp, err := c.Txn().
			If(NodeAbsent("/tx")).
			Then(OpCreate("/tx", []byte("v1"))).
			Else(OpGet("/tx")).
			Commit(ctx)
		if err != nil || resp.Succeeded != want || len(resp.Results) != 1 {
			t.Fatalf("txn %d: %+v %v", i, resp, err)
		}
		if !want && (string(resp.Results[0].Data) != "v1" || resp.Results[0].Stat.Version != 0) {
			t.Fatalf("else get: %+v", resp.Results[0])
		}
	}
	// Set if the value is still v1, with every kind of compare holding.
	_, st, err := c.Get(ctx, "/tx")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Txn().
		If(Compare(Value("/tx"), "=", "v1"), Compare(Value("/tx"), ">", []byte("v0")),
			Compare(Version("/tx"), "=", 0), Compare(CreateRev("/tx"), "=", st.CreateRev),
			Compare(ModRev("/tx"), "<", int64(st.ModRev+1)), Compare(Owner("/tx"), "=", 0), NodeExists("/tx")).
		Then(OpSet("/tx", []byte("v2")), OpGet("/tx")).
		Commit(ctx)
	if err != nil || !resp.Succeeded || string(resp.Results[1].Data) != "v2" || resp.Results[1].Stat.Version != 1 {
		t.Fatalf("conditional set: %+v %v", resp, err)
	}
	// A failing op of the running branch fails the txn: nothing applied.
	resp, err = c.Txn().
		If(Compare(Value("/tx"), "!=", "v2")).
		Else(OpCreate("/tx/new", nil), OpCreate("/tx", nil)).
		Commit(ctx)
	if !errors.Is(err, ErrNodeExists) || resp == nil || resp.Succeeded || !errors.Is(resp.Results[1].Err, ErrNodeExists) {
		t.Fatalf("failing else: %+v %v", resp, err)
	}
	if ok, _, _ := c.Exists(ctx, "/tx/new"); ok {
		t.Fatal("a failed txn created /tx/new")
	}
	// Bad compares are refused before sending; get is refused in a multi.
	if _, err := c.Txn().If(Compare(Version("/tx"), "~", 1)).Commit(ctx); !errors.Is(err, ErrBadOption) {
		t.Fatalf("bad operator: %v", err)
	}
	if _, err := c.Txn().If(Compare(Value("/tx"), "=", 3)).Commit(ctx); !errors.Is(err, ErrBadOption) {
		t.Fatalf("value against a number: %v", err)
	}
	if _, err := c.Multi(ctx, OpGet("/tx")); !errors.Is(err, ErrBadOption) {
		t.Fatalf("get in a multi: %v", err)
	}
	// A session's txn owns its ephemerals; the owner compare sees it.
	s, err := c.NewSession(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Txn().Then(OpCreate("/tx/e", nil, Ephemeral())).Commit(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err = c.Txn().If(Compare(Owner("/tx/e"), "=", s.ID())).Then(OpCheck("/tx/e", 0)).Commit(ctx)
	if err != nil || !resp.Succeeded {
		t.Fatalf("owner compare: %+v %v", resp, err)
	}
}
