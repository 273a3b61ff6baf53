package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/latch-io/latch/server/adminapi"
	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// Reads that scale, against real latchd processes: learners answer stale
// reads (never older than the revision the reader asks for, and never
// counting toward quorum), and a follower cut off from the leader answers
// old state marked with the revision it was read at and refuses a reader
// that saw later. A cut-off cache holder: cache_cut_process_test.go.

// ackedWrite is a write of a node the cluster acknowledged.
type ackedWrite struct {
	value string
	rev   uint64
}

// checkStaleAnswer judges one Stale read of a node asked at minRev: the
// answer (value, its ModRev, and rev, the revision the member read it
// at) or its error. writes are the node's acknowledged writes in
// revision order. ErrBehind is a correct answer (the member says it has
// not applied minRev). Otherwise the answer must be at minRev or later
// (never older than what the reader saw), and its mark must be true: the
// value is the node's last acknowledged write at or before rev.
func checkStaleAnswer(writes []ackedWrite, minRev uint64, value string, modRev, rev uint64, err error) error {
	if errors.Is(err, ErrBehind) {
		return nil
	}
	if err != nil {
		return err
	}
	if rev < minRev {
		return fmt.Errorf("answered at revision %d, older than MinRev %d", rev, minRev)
	}
	if modRev > rev {
		return fmt.Errorf("value written at revision %d, after the revision %d it was read at", modRev, rev)
	}
	for _, w := range writes {
		if w.rev == modRev && w.value != value {
			return fmt.Errorf("value %q at revision %d, but %q was written there", value, modRev, w.value)
		}
		if modRev < w.rev && w.rev <= rev {
			return fmt.Errorf("value %q (revision %d) read at revision %d, but %q was written at %d: older than its mark",
				value, modRev, rev, w.value, w.rev)
		}
	}
	return nil
}

func TestStaleAnswerCheckerCatchesBadAnswers(t *testing.T) {
	writes := []ackedWrite{{"a", 10}, {"b", 14}}
	for name, a := range map[string]struct {
		minRev, modRev, rev uint64
		value               string
		err                 error
	}{
		"current":        {minRev: 14, value: "b", modRev: 14, rev: 20},
		"old but marked": {minRev: 0, value: "a", modRev: 10, rev: 12},
		"behind":         {minRev: 30, err: ErrBehind},
	} {
		if err := checkStaleAnswer(writes, a.minRev, a.value, a.modRev, a.rev, a.err); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, a := range map[string]struct {
		minRev, modRev, rev uint64
		value               string
	}{
		"older than MinRev":  {minRev: 14, value: "a", modRev: 10, rev: 12},
		"older than marked":  {minRev: 0, value: "a", modRev: 10, rev: 15},
		"wrong value":        {minRev: 0, value: "c", modRev: 14, rev: 14},
		"written after read": {minRev: 0, value: "b", modRev: 14, rev: 12},
	} {
		if err := checkStaleAnswer(writes, a.minRev, a.value, a.modRev, a.rev, nil); err == nil {
			t.Errorf("%s: a bad answer passed", name)
		}
	}
}

// dialReads dials a client of the cluster of certs whose Stale reads go to readEps; edit
// adjusts the config first (nil: none).
func dialReads(t *testing.T, certs session.DevCerts, endpoints, readEps []string, edit func(*Config)) *Client {
	t.Helper()
	tlsConf, err := session.ClientTLS(certs.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Endpoints: endpoints, ReadEndpoints: readEps, TLS: tlsConf, SessionTTL: 5 * time.Second,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
	if edit != nil {
		edit(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), proc.WaitTimeout)
	defer cancel()
	cl, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// memberConn is a raw connection to one member, for Stale reads at a
// MinRev the test chooses, answered by that member and no other.
func memberConn(t *testing.T, certs session.DevCerts, addr string) *session.Conn {
	t.Helper()
	tlsConf, err := session.ClientTLS(certs.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), proc.WaitTimeout)
	defer cancel()
	conn, err := session.Dial(ctx, addr, tlsConf, session.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.CloseWithError(session.ConnClosed, "") })
	if _, err := session.Hello(ctx, conn, "test"); err != nil {
		t.Fatal(err)
	}
	return conn
}

// staleGet asks the member on conn for a Stale read of path at minRev.
func staleGet(ctx context.Context, conn *session.Conn, path string, minRev uint64) (*session.Response, error) {
	resp, err := session.RoundTrip(ctx, conn, &session.Request{Type: session.MsgGet, Path: path, Stale: true, MinRev: minRev})
	if err != nil {
		return nil, err
	}
	return resp, resp.Err()
}

// judge checks one staleGet answer with checkStaleAnswer.
func judge(writes []ackedWrite, minRev uint64, resp *session.Response, err error) error {
	if resp == nil {
		return checkStaleAnswer(writes, minRev, "", 0, 0, err)
	}
	return checkStaleAnswer(writes, minRev, string(resp.Data), resp.Stat.ModRev, resp.Rev, err)
}

// addLearners adds n learners to c, named after its members (n4, n5, ...
// for three): each is put into the raft configuration as a non-voter
// through the leader's admin API, then started with --join, and the
// call returns once each has applied what the leader had committed.
func addLearners(t *testing.T, c *proc.Cluster, n int) []*proc.Node {
	t.Helper()
	leader := c.Nodes[c.WaitLeader(t)]
	admin, err := proc.AdminTLS(c.Certs)
	if err != nil {
		t.Fatal(err)
	}
	var learners []*proc.Node
	for i := range n {
		id := fmt.Sprintf("n%d", len(c.Nodes)+i+1)
		args, err := proc.MemberArgs(c.Certs, id)
		if err != nil {
			t.Fatal(err)
		}
		nd := proc.NewNode(t, proc.Options{ID: id, Args: append([]string{"--join", leader.HTTPAddr}, args...)})
		nd.SetAdminTLS(admin)
		body := fmt.Sprintf(`{"id":%q,"raft_addr":%q,"learner":true}`, id, nd.RaftAddr)
		var reply adminapi.MembersReply
		if code := adminJSON(t, c, http.MethodPost, leader.HTTPAddr, "/v1/members/add", body, &reply); code != http.StatusOK {
			t.Fatalf("add learner %s: status %d", id, code)
		}
		nd.Start(t)
		nd.WaitHealthy(t)
		learners = append(learners, nd)
	}
	proc.Eventually(t, "learners caught up", func() error {
		ls, err := leader.Status()
		if err != nil {
			return err
		}
		for _, nd := range learners {
			st, err := nd.Status()
			if err != nil {
				return err
			}
			if st.LeaderID != ls.ID || st.AppliedIndex < ls.CommitIndex {
				return fmt.Errorf("%s: leader %q, applied %d of %d", nd.ID, st.LeaderID, st.AppliedIndex, ls.CommitIndex)
			}
		}
		return nil
	})
	return learners
}

// TestLearnerReadsProcess: three voters and two learners. After every
// acknowledged write, each learner asked for a Stale read at the write's
// revision answers that write (or a later one) or ErrBehind, never older
// state; clients reading from the learners see their own writes and
// never go back in time. Then two voters are killed: with one voter of
// three left, no write is acknowledged although three of five members
// run (learners do not count toward quorum), and the learners still
// answer stale reads at the last acknowledged revision, refusing any
// later one with ErrBehind rather than pretending.
func TestLearnerReadsProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := proc.StartCluster(t, 3)
	learners := addLearners(t, c, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	writer := dialProcCluster(t, c, 5*time.Second)
	var (
		conns   []*session.Conn
		readers []*Client
		// idle read from a learner only once quorum is lost: they saw
		// nothing newer than their session's start.
		idle []*Client
	)
	for _, l := range learners {
		conns = append(conns, memberConn(t, c.Certs, l.ClientAddr))
		readers = append(readers, dialReads(t, c.Certs, c.ClientAddrs(), []string{l.ClientAddr}, nil))
		idle = append(idle, dialReads(t, c.Certs, c.ClientAddrs(), []string{l.ClientAddr}, nil))
	}
	if _, err := writer.Create(ctx, "/lr", []byte("0")); err != nil {
		t.Fatal(err)
	}
	for j, r := range readers {
		if _, err := r.Create(ctx, fmt.Sprintf("/lr-own-%d", j), nil); err != nil {
			t.Fatal(err)
		}
	}
	var (
		writes  []ackedWrite
		served  = make([]int, len(learners)) // answered by the learner itself
		behind  = make([]int, len(learners))
		reads   = make([][]staleRead, len(readers))
		onLearn = make([]int, len(readers)) // reads sent to the reader's learner
	)
	for i := 1; i <= 100; i++ {
		v := strconv.Itoa(i)
		st, err := writer.Set(ctx, "/lr", []byte(v))
		if errors.Is(err, ErrUnknownOutcome) {
			continue // a leader change: the write is not known to be acknowledged
		}
		if err != nil {
			t.Fatal(err)
		}
		writes = append(writes, ackedWrite{value: v, rev: st.ModRev})
		for j, conn := range conns {
			resp, err := staleGet(ctx, conn, "/lr", st.ModRev)
			if err := judge(writes, st.ModRev, resp, err); err != nil {
				t.Fatalf("learner %s, Stale read at the revision %d of write %q: %v", learners[j].ID, st.ModRev, v, err)
			}
			if err == nil {
				served[j]++
			} else {
				behind[j]++
			}
		}
		for j, r := range readers {
			own := fmt.Sprintf("/lr-own-%d", j)
			ost, err := r.Set(ctx, own, []byte(v))
			if err != nil && !errors.Is(err, ErrUnknownOutcome) {
				t.Fatal(err)
			}
			data, gst, err := r.Get(ctx, own, Stale())
			if err != nil {
				t.Fatal(err)
			}
			if ost.ModRev != 0 && (string(data) != v || gst.ModRev < ost.ModRev) {
				t.Fatalf("reader %d: its Stale read returned %q at revision %d after its write of %q at %d was acknowledged",
					j, data, gst.ModRev, v, ost.ModRev)
			}
			data, gst, err = r.Get(ctx, "/lr", Stale())
			if err != nil {
				t.Fatal(err)
			}
			n, err := strconv.ParseInt(string(data), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			m := r.ReadMember()
			reads[j] = append(reads[j], staleRead{value: n, modRev: gst.ModRev, stale: true, member: m})
			if m == learners[j].ID {
				onLearn[j]++
			}
		}
	}
	for j := range readers {
		if err := checkMonotonic(reads[j]); err != nil {
			t.Fatalf("reader %d: %v", j, err)
		}
	}
	for j, l := range learners {
		if served[j] == 0 || onLearn[j] == 0 {
			t.Fatalf("learner %s answered %d raw reads (%d behind) and was the read member of %d client reads: the test did not read from it",
				l.ID, served[j], behind[j], onLearn[j])
		}
		t.Logf("learner %s: %d raw reads at the write's revision answered, %d ErrBehind; read member of %d of %d client reads",
			l.ID, served[j], behind[j], onLearn[j], len(reads[j]))
	}

	// Quorum lost: one voter of three, two learners.
	leader := c.WaitLeader(t)
	last := writes[len(writes)-1]
	var killed []int
	for i, nd := range c.Nodes {
		if i != leader {
			nd.Kill(t)
			killed = append(killed, i)
		}
	}
	wctx, wcancel := context.WithTimeout(ctx, 3*time.Second)
	_, err := writer.Set(wctx, "/lr", []byte("no-quorum"))
	wcancel()
	if err == nil {
		t.Fatal("a write was acknowledged with one voter of three and two learners running: learners counted toward quorum")
	}
	t.Logf("write with one voter and two learners: %v", err)
	for j, conn := range conns {
		var resp *session.Response
		proc.Eventually(t, learners[j].ID+" answers at the last acknowledged revision", func() error {
			var err error
			resp, err = staleGet(ctx, conn, "/lr", last.rev)
			return err
		})
		if err := judge(writes, last.rev, resp, nil); err != nil {
			t.Fatalf("learner %s without quorum: %v", learners[j].ID, err)
		}
		if string(resp.Data) != last.value {
			t.Fatalf("learner %s without quorum answered %q, want the last acknowledged %q", learners[j].ID, resp.Data, last.value)
		}
		// How stale it is: its answer names the revision it read at, and
		// it refuses a reader that saw a later one.
		if _, err := staleGet(ctx, conn, "/lr", resp.Rev+1); !errors.Is(err, ErrBehind) {
			t.Fatalf("learner %s, Stale read past its revision %d: %v, want ErrBehind", learners[j].ID, resp.Rev, err)
		}
		// Through the client library, from a client that saw nothing
		// newer than the learner has (its read connection may still be
		// on its way: the read is retried until it is answered).
		var (
			data []byte
			st   Stat
		)
		proc.Eventually(t, "a Stale read from "+learners[j].ID+" without quorum", func() error {
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
			defer rcancel()
			var err error
			data, st, err = idle[j].Get(rctx, "/lr", Stale())
			return err
		})
		if string(data) != last.value || st.ModRev != last.rev || idle[j].ReadMember() != learners[j].ID {
			t.Fatalf("Stale read from learner %s without quorum: %q at revision %d from %q; want %q at %d",
				learners[j].ID, data, st.ModRev, idle[j].ReadMember(), last.value, last.rev)
		}
		// A reader that wrote last may have seen a revision the learner
		// never learned was committed: it is refused (and finds no
		// leader), or answered the same.
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		data, _, err := readers[j].Get(rctx, "/lr", Stale())
		rcancel()
		if err == nil && string(data) != last.value {
			t.Fatalf("reader %d's Stale read from learner %s without quorum: %q; want %q", j, learners[j].ID, data, last.value)
		}
		t.Logf("learner %s without quorum answers revision %d (the last write acknowledged at %d)", learners[j].ID, resp.Rev, last.rev)
	}
	for _, i := range killed {
		c.Nodes[i].Restart(t)
	}
	proc.Eventually(t, "writes again with the voters back", func() error {
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
		defer wcancel()
		_, err := writer.Set(wctx, "/lr", []byte("quorum"))
		return err
	})
}

// httpNode is the part of the HTTP API's node answer the tests judge.
type httpNode struct {
	Data string `json:"data"`
	Stat struct {
		ModRevision uint64 `json:"mod_revision"`
	} `json:"stat"`
	Revision uint64 `json:"revision"`
}

// httpStaleGet reads path with ?stale=true from the HTTP API at addr.
func httpStaleGet(t *testing.T, certs session.DevCerts, addr, path string) httpNode {
	t.Helper()
	tlsConf, err := session.ClientTLS(certs.CA, "", "")
	if err != nil {
		t.Fatal(err)
	}
	tlsConf = tlsConf.Clone()
	tlsConf.NextProtos = nil // the client's QUIC protocol; HTTPS negotiates its own
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConf, DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := hc.Get("https://" + addr + "/api/v1/nodes" + path + "?stale=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var n httpNode
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s?stale=true on %s: %s", path, addr, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
