package server_test

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/server/servertest"
	"github.com/latch-io/latch/session"
)

// Every API route against three real latchd processes, sent to a
// follower (which forwards to the leader), then a follower serving
// requests while the leader is killed.
func TestAPIEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := proc.StartCluster(t, 3)
	li := c.WaitLeader(t)
	fi := (li + 1) % 3
	f, l := c.Nodes[fi].APIAddr, c.Nodes[li].APIAddr
	api := newAPIClient(t, c.Certs.CA)

	// Health, OpenAPI, console, members.
	api.do(200, f, "GET", "/api/v1/health", nil)
	if doc := api.do(200, f, "GET", "/api/v1/openapi.json", nil); doc.str("openapi") == "" {
		t.Fatalf("openapi document: %v", doc)
	}
	for path, want := range map[string]string{"/": "<title>latch console</title>", "/console/console.js": "EventSource", "/console/console.css": "body"} {
		resp, err := api.hc.Get("https://" + f + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Fatalf("GET %s: %d, %d bytes without %q", path, resp.StatusCode, len(b), want)
		}
	}
	if ms := api.do(200, f, "GET", "/api/v1/members", nil).list("members"); len(ms) != 3 {
		t.Fatalf("members: %v", ms)
	}

	// Sessions: open, keepalive, list, close; a wrong secret is refused.
	s := api.do(201, f, "POST", "/api/v1/sessions", map[string]any{"ttl_ms": 10000})
	tok, sid := s.str("token"), s.num("session_id")
	hdr := "Latch-Session: " + tok
	if s.num("ttl_ms") != 10000 || sid == 0 || tok == "" {
		t.Fatalf("open session: %v", s)
	}
	api.do(200, f, "POST", fmt.Sprintf("/api/v1/sessions/%d/keepalive", sid), nil, hdr)
	bad := fmt.Sprintf("Latch-Session: %d.%s", sid, strings.Repeat("ab", 16))
	if e := api.do(401, f, "POST", fmt.Sprintf("/api/v1/sessions/%d/keepalive", sid), nil, bad); e.str("name") != "BadSecret" {
		t.Fatalf("wrong secret: %v", e)
	}
	found := false
	for _, x := range api.do(200, f, "GET", "/api/v1/sessions", nil).list("sessions") {
		found = found || uint64(x.(map[string]any)["id"].(float64)) == sid
	}
	if !found {
		t.Fatalf("session %d not listed", sid)
	}

	// Nodes: create, get, set with versions, stat, children paged, multi,
	// delete with version; an ephemeral node belongs to the session.
	api.do(201, f, "POST", "/api/v1/nodes/app", map[string]any{"data": "v0"})
	api.do(409, f, "POST", "/api/v1/nodes/app", map[string]any{"data": "again"})
	g := api.do(200, f, "GET", "/api/v1/nodes/app", nil)
	if g.str("data") != "v0" {
		t.Fatalf("get: %v", g)
	}
	if e := api.do(409, f, "PUT", "/api/v1/nodes/app", map[string]any{"data": "v1", "version": 7}); e.str("name") != "BadVersion" {
		t.Fatalf("set with a wrong version: %v", e)
	}
	api.do(200, f, "PUT", "/api/v1/nodes/app", map[string]any{"data": "v1", "version": 0})
	st := api.do(200, f, "GET", "/api/v1/stat/app", nil)
	if st["stat"].(map[string]any)["version"].(float64) != 1 {
		t.Fatalf("stat after set: %v", st)
	}
	api.do(200, l, "GET", "/api/v1/nodes/app?stale=true", nil)
	for i := 0; i < 5; i++ {
		api.do(201, f, "POST", fmt.Sprintf("/api/v1/nodes/app/c%d", i), nil)
	}
	eph := api.do(201, f, "POST", "/api/v1/nodes/app/e-", map[string]any{"ephemeral": true, "sequential": true}, hdr)
	if !strings.HasPrefix(eph.str("path"), "/app/e-0") {
		t.Fatalf("sequential create: %v", eph)
	}
	var names []string
	after := ""
	for pages := 0; ; pages++ {
		page := api.do(200, f, "GET", "/api/v1/children/app?limit=2&after="+after, nil)
		for _, n := range page.list("children") {
			names = append(names, n.(string))
		}
		if page["more"] != true {
			break
		}
		after = page.str("next_after")
		if pages > 10 {
			t.Fatal("children paging does not end")
		}
	}
	if len(names) != 6 || names[0] != "c0" {
		t.Fatalf("children: %v", names)
	}
	m := api.do(409, f, "POST", "/api/v1/multi", map[string]any{"ops": []map[string]any{
		{"op": "create", "path": "/app/m1"}, {"op": "check", "path": "/app", "version": 9},
	}})
	if rs := m.list("results"); len(rs) != 2 || m.str("name") != "BadVersion" {
		t.Fatalf("failed multi: %v", m)
	}
	api.do(404, f, "GET", "/api/v1/nodes/app/m1", nil)
	api.do(200, f, "POST", "/api/v1/multi", map[string]any{"ops": []map[string]any{
		{"op": "create", "path": "/app/m1", "data": "x"}, {"op": "set", "path": "/app", "data": "v2", "version": 1},
	}})
	api.do(409, f, "DELETE", "/api/v1/nodes/app/m1?version=3", nil)
	api.do(200, f, "DELETE", "/api/v1/nodes/app/m1?version=0", nil)
	api.do(404, f, "GET", "/api/v1/stat/app/m1", nil)

	// Watches (SSE) on a follower: data, children, recursive.
	data, err := api.sse(f, "/api/v1/watch/app?kind=data", "")
	if err != nil {
		t.Fatal(err)
	}
	defer data.close()
	kids, err := api.sse(f, "/api/v1/watch/app?kind=children", "")
	if err != nil {
		t.Fatal(err)
	}
	defer kids.close()
	rec, err := api.sse(f, "/api/v1/watch/?kind=recursive", "")
	if err != nil {
		t.Fatal(err)
	}
	defer rec.close()
	for _, w := range []*sseStream{data, kids, rec} {
		w.next(t, 10*time.Second, "ready")
	}
	// A follower's watch starts at its own applied revision, which may
	// be behind the writes above: wait for the revision of each change.
	set := api.do(200, f, "PUT", "/api/v1/nodes/app", map[string]any{"data": "v3"})
	if ev := untilRev(t, data, set.num("revision")); ev.Data.list("events")[0].(map[string]any)["type"] != "data-changed" {
		t.Fatalf("data watch: %+v", ev)
	}
	cr := api.do(201, f, "POST", "/api/v1/nodes/app/w", nil)
	if ev := untilRev(t, kids, cr.num("revision")); ev.Data.list("events")[0].(map[string]any)["path"] != "/app" {
		t.Fatalf("children watch: %+v", ev)
	}
	if ev := untilRev(t, rec, cr.num("revision")); len(ev.Data.list("events")) != 2 {
		t.Fatalf("recursive watch: %+v", ev)
	}

	// Locks: the REST design's acquire/renew/release with client_id on an
	// implicit lease; a long poll granted on release with a larger token;
	// wait_timeout_ms; the queue; a session's shared locks.
	a1 := api.do(200, f, "POST", "/api/v1/locks/jobs/nightly/acquire", map[string]any{"client_id": "w1", "ttl_ms": 20000})
	if a1["acquired"] != true || a1.num("fencing_token") == 0 || a1.str("expires_at") == "" {
		t.Fatalf("acquire: %v", a1)
	}
	if a := api.do(200, f, "POST", "/api/v1/locks/jobs/nightly/acquire", map[string]any{"client_id": "w2", "ttl_ms": 20000, "wait_timeout_ms": 100}); a["acquired"] != false {
		t.Fatalf("acquire of a held lock without waiting long enough: %v", a)
	}
	waited := make(chan apiReply, 1)
	go func() {
		_, out, _ := api.raw(f, "POST", "/api/v1/locks/jobs/nightly/acquire", map[string]any{"client_id": "w2", "ttl_ms": 20000, "wait_timeout_ms": 20000})
		waited <- out
	}()
	waitQueueLen(t, api, l, "/jobs/nightly", 2)
	q := api.do(200, f, "GET", "/api/v1/locks/jobs/nightly/queue", nil).list("queue")
	if first := q[0].(map[string]any); first["client_id"] != "w1" || first["granted"] != true || q[1].(map[string]any)["granted"] != false {
		t.Fatalf("queue: %v", q)
	}
	lease1 := a1.str("lease_token")
	rn := api.do(200, f, "POST", "/api/v1/locks/jobs/nightly/renew", map[string]any{"client_id": "w1", "fencing_token": a1.num("fencing_token"), "ttl_ms": 20000, "lease_token": lease1})
	if rn["renewed"] != true || rn.str("new_expires_at") == "" {
		t.Fatalf("renew: %v", rn)
	}
	api.do(409, f, "POST", "/api/v1/locks/jobs/nightly/release", map[string]any{"client_id": "w3", "fencing_token": a1.num("fencing_token"), "lease_token": lease1})
	api.do(401, f, "POST", "/api/v1/locks/jobs/nightly/release", map[string]any{"client_id": "w1", "fencing_token": a1.num("fencing_token")})
	api.do(200, f, "POST", "/api/v1/locks/jobs/nightly/release", map[string]any{"client_id": "w1", "fencing_token": a1.num("fencing_token"), "lease_token": lease1})
	for _, x := range api.do(200, f, "GET", "/api/v1/sessions", nil).list("sessions") {
		if uint64(x.(map[string]any)["id"].(float64)) == a1.num("session_id") {
			t.Fatalf("the implicit lease %d outlived its release", a1.num("session_id"))
		}
	}
	select {
	case a2 := <-waited:
		if a2["acquired"] != true || a2.num("fencing_token") <= a1.num("fencing_token") {
			t.Fatalf("waiter after release: %v (first token %d)", a2, a1.num("fencing_token"))
		}
		api.do(200, f, "POST", "/api/v1/locks/jobs/nightly/release", map[string]any{"fencing_token": a2.num("fencing_token"), "lease_token": a2.str("lease_token")})
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting acquire was not granted on release")
	}
	sh1 := api.do(200, f, "POST", "/api/v1/locks/db/acquire", map[string]any{"mode": "shared"}, hdr)
	sh2 := api.do(200, f, "POST", "/api/v1/locks/db/acquire", map[string]any{"mode": "shared", "client_id": "other", "ttl_ms": 5000})
	if sh1["acquired"] != true || sh2["acquired"] != true || sh1.str("expires_with") != "session" || sh1.str("expires_at") == "" {
		t.Fatalf("shared locks: %v %v", sh1, sh2)
	}
	if all := api.do(200, f, "GET", "/api/v1/locks", nil).list("locks"); len(all) == 0 {
		t.Fatal("GET /api/v1/locks lists no queue")
	}
	api.do(200, f, "POST", "/api/v1/locks/db/release", map[string]any{"fencing_token": sh1.num("fencing_token")}, hdr)

	// Elections: campaign, leader, proclaim, observe, resign.
	obs, err := api.sse(f, "/api/v1/elections/svc/leader/observe", "")
	if err != nil {
		t.Fatal(err)
	}
	defer obs.close()
	if ev := obs.next(t, 10*time.Second, "leader"); ev.Data["none"] != true {
		t.Fatalf("observe before a campaign: %+v", ev)
	}
	api.do(404, f, "GET", "/api/v1/elections/svc/leader/leader", nil)
	camp := api.do(200, f, "POST", "/api/v1/elections/svc/leader/campaign", map[string]any{"data": "10.0.0.7:80"}, hdr)
	term := camp.num("term")
	if camp["leader"] != true || term == 0 {
		t.Fatalf("campaign: %v", camp)
	}
	if ld := api.do(200, f, "GET", "/api/v1/elections/svc/leader/leader", nil); ld.str("data") != "10.0.0.7:80" || ld.num("term") != term {
		t.Fatalf("leader: %v", ld)
	}
	if ev := obs.next(t, 10*time.Second, "leader"); ev.Data.str("data") != "10.0.0.7:80" {
		t.Fatalf("observe after campaign: %+v", ev)
	}
	api.do(200, f, "POST", "/api/v1/elections/svc/leader/proclaim", map[string]any{"term": term, "data": "10.0.0.8:80"}, hdr)
	if ev := obs.next(t, 10*time.Second, "leader"); ev.Data.str("data") != "10.0.0.8:80" || ev.Data.num("term") != term {
		t.Fatalf("observe after proclaim: %+v", ev)
	}
	api.do(200, f, "POST", "/api/v1/elections/svc/leader/resign", map[string]any{"term": term}, hdr)
	if ev := obs.next(t, 10*time.Second, "leader"); ev.Data["none"] != true {
		t.Fatalf("observe after resign: %+v", ev)
	}
	api.do(404, f, "GET", "/api/v1/elections/svc/leader/leader", nil)

	// The console's cluster view, and its stream.
	cv := api.do(200, f, "GET", "/api/v1/cluster", nil)
	if len(cv.list("members")) != 3 || len(cv.list("sessions")) == 0 {
		t.Fatalf("cluster view: %v", cv)
	}
	cs, err := api.sse(f, "/api/v1/cluster/events", "")
	if err != nil {
		t.Fatal(err)
	}
	cs.next(t, 10*time.Second, "cluster")
	cs.close()

	api.do(200, f, "DELETE", fmt.Sprintf("/api/v1/sessions/%d", sid), nil, hdr)
	api.do(404, f, "GET", "/api/v1/nodes"+eph.str("path"), nil) // the ephemeral went with its session

	// Kill the leader while a follower serves reads and writes: after the
	// kill every request through the follower succeeds (the follower
	// waits for the new leader and forwards there); a write in flight at
	// the kill may end UnknownOutcome, nothing else.
	data.close()
	kids.close()
	rec.close()
	obs.close()
	var (
		mu          sync.Mutex
		failures    []string
		ok, unknown int
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var killedAt time.Time
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				p := fmt.Sprintf("/api/v1/nodes/app/k%d-%d", w, i)
				code, out, err := api.raw(f, "POST", p, map[string]any{"data": "x"})
				if err == nil && code == 201 {
					code, out, err = api.raw(f, "GET", p, nil)
				}
				mu.Lock()
				switch {
				case err == nil && code == 200:
					ok++
				case code == 503 && out.str("name") == "UnknownOutcome":
					// A write whose commit a leader change interrupted
					// (the kill, or a further election on a loaded
					// machine): an honest answer, not a failure.
					unknown++
				default:
					failures = append(failures, fmt.Sprintf("%s at %v: %d %v %v", p, start.Sub(killedAt), code, out, err))
				}
				mu.Unlock()
			}
		}()
	}
	served := func() int {
		mu.Lock()
		defer mu.Unlock()
		return ok
	}
	// Requests flow through the follower before the kill.
	servertest.Eventually(t, "requests served through the follower before the kill", func() error {
		mu.Lock()
		defer mu.Unlock()
		if ok < 20 && len(failures) == 0 {
			return fmt.Errorf("%d served", ok)
		}
		return nil
	})
	mu.Lock()
	killedAt = time.Now()
	mu.Unlock()
	c.Nodes[li].Kill(t)
	// Wait until the follower served requests after the new leader came.
	nl := c.WaitLeader(t)
	before := served()
	servertest.Eventually(t, "the follower serves requests after the new leader "+c.Nodes[nl].ID+" came", func() error {
		if n := served() - before; n < 20 {
			return fmt.Errorf("%d served", n)
		}
		return nil
	})
	close(stop)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d requests failed through the follower across the leader kill (%d ok), e.g. %v", len(failures), ok, failures[:min(5, len(failures))])
	}
	t.Logf("%d create+get pairs through follower %s across the kill of %s, %d writes UnknownOutcome", ok, c.Nodes[fi].ID, c.Nodes[li].ID, unknown)
}

// untilRev reads change events up to the one of revision rev.
func untilRev(t *testing.T, s *sseStream, rev uint64) sseEvent {
	t.Helper()
	for {
		ev := s.next(t, 10*time.Second, "change")
		switch got := ev.Data.num("revision"); {
		case got == rev && ev.ID == fmt.Sprint(rev):
			return ev
		case got > rev:
			t.Fatalf("watch skipped revision %d: next is %+v", rev, ev)
		}
	}
}

// waitQueueLen polls a lock queue until it has n requests.
func waitQueueLen(t *testing.T, api *apiClient, addr, path string, n int) {
	t.Helper()
	servertest.Eventually(t, "queue of "+path, func() error {
		if q := api.do(200, addr, "GET", "/api/v1/locks"+path, nil).list("queue"); len(q) != n {
			return fmt.Errorf("%d requests, want %d", len(q), n)
		}
		return nil
	})
}

// An SSE watch resumes across a leader change with Last-Event-ID: the
// events seen, joined across the reconnection, are exactly the committed
// creations (checked against each node's create revision), in order,
// none lost or repeated.
func TestAPIWatchResumesAcrossLeaderChange(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := proc.StartCluster(t, 3)
	li := c.WaitLeader(t)
	api := newAPIClient(t, c.Certs.CA)
	writer := c.Nodes[(li+1)%3].APIAddr
	api.do(201, writer, "POST", "/api/v1/nodes/w", nil)

	// The watch is served by the leader, which is then killed.
	w, err := api.sse(c.Nodes[li].APIAddr, "/api/v1/watch/w?kind=children,recursive", "")
	if err != nil {
		t.Fatal(err)
	}
	ready := w.next(t, 10*time.Second, "ready")
	lastID := ready.ID

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			api.raw(writer, "POST", fmt.Sprintf("/api/v1/nodes/w/n%04d", i), nil)
		}
	}()
	seen := map[string]uint64{} // created path -> revision
	var revs []uint64
	consume := func(s *sseStream, until func() bool) {
		for !until() {
			select {
			case ev, ok := <-s.events:
				if !ok {
					return
				}
				switch ev.Name {
				case "resync":
					t.Fatalf("resync at %s: history lost", ev.ID)
				case "change":
					lastID = ev.ID
					revs = append(revs, ev.Data.num("revision"))
					for _, e := range ev.Data.list("events") {
						e := e.(map[string]any)
						if e["type"] == "created" {
							p := e["path"].(string)
							if _, dup := seen[p]; dup {
								t.Fatalf("created %s twice", p)
							}
							seen[p] = ev.Data.num("revision")
						}
					}
				}
			case <-time.After(15 * time.Second):
				t.Fatal("watch went silent")
			}
		}
	}
	consume(w, func() bool { return len(seen) >= 30 })
	c.Nodes[li].Kill(t)
	consume(w, func() bool { return false }) // until the stream ends with its member
	w.close()
	nl := c.WaitLeader(t)
	// Resume on a surviving member (the new leader) from the last id.
	w2, err := api.sse(c.Nodes[nl].APIAddr, "/api/v1/watch/w?kind=children,recursive", lastID)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.close()
	if r := w2.next(t, 10*time.Second, "ready", "resync"); r.Name != "ready" || r.ID != lastID {
		t.Fatalf("resumed watch starts with %+v, want ready at %s", r, lastID)
	}
	consume(w2, func() bool { return len(seen) >= 100 })
	close(stop)
	<-done
	// Everything written so far is committed; wait for the watch to see
	// all of it, then compare with the tree.
	var kids []string
	for after := ""; ; {
		page := api.do(200, writer, "GET", "/api/v1/children/w?after="+after, nil)
		for _, n := range page.list("children") {
			kids = append(kids, n.(string))
		}
		if page["more"] != true {
			break
		}
		after = page.str("next_after")
	}
	consume(w2, func() bool { return len(seen) >= len(kids) })
	if len(seen) != len(kids) {
		t.Fatalf("watch saw %d creations, the tree has %d children", len(seen), len(kids))
	}
	for _, k := range kids {
		p := "/w/" + k
		st := api.do(200, writer, "GET", "/api/v1/stat"+p, nil)
		if rev := st["stat"].(map[string]any)["create_revision"].(float64); seen[p] != uint64(rev) {
			t.Fatalf("%s created at revision %v, the watch said %d", p, rev, seen[p])
		}
	}
	if !sort.SliceIsSorted(revs, func(i, j int) bool { return revs[i] < revs[j] }) {
		t.Fatal("watch revisions out of order")
	}
	for i := 1; i < len(revs); i++ {
		if revs[i] == revs[i-1] {
			t.Fatalf("revision %d delivered twice", revs[i])
		}
	}
	t.Logf("%d creations seen exactly once across the kill of %s (resumed at %s on %s)", len(seen), c.Nodes[li].ID, lastID, c.Nodes[nl].ID)
}

// With a client CA, the API requires a client certificate and records its
// identity; a follower forwarding to the leader carries that identity,
// and the forwarding headers are believed only from a member: a client
// that sends them itself changes nothing.
func TestAPIIdentityAcrossForwarding(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	clients, err := session.EnsureDevCerts(filepath.Join(t.TempDir(), "clients"))
	if err != nil {
		t.Fatal(err)
	}
	c := proc.StartCluster(t, 3, "--tls-client-ca", clients.CA)
	li := c.WaitLeader(t)
	f := c.Nodes[(li+1)%3].APIAddr
	const who = "api-client"
	certFile, keyFile, err := clients.Client(who)
	if err != nil {
		t.Fatal(err)
	}
	api := newAPIClientCert(t, c.Certs.CA, certFile, keyFile)
	s := api.do(201, f, "POST", "/api/v1/sessions", map[string]any{"ttl_ms": 10000},
		"Latch-Forwarded-By: n1", "Latch-Identity: root") // forged: ignored
	identity := ""
	for _, x := range api.do(200, f, "GET", "/api/v1/sessions", nil).list("sessions") {
		if x := x.(map[string]any); uint64(x["id"].(float64)) == s.num("session_id") {
			identity = x["identity"].(string)
		}
	}
	if identity != who {
		t.Fatalf("session opened through follower has identity %q, want %q", identity, who)
	}
	if _, _, err := newAPIClient(t, c.Certs.CA).raw(f, "GET", "/api/v1/health", nil); err == nil {
		t.Fatal("a client without a certificate was served although a client CA is required")
	}
}
