package client

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/latch-io/latch/server/servertest"
)

// TestPartitionedFollowerReads cuts one follower's raft traffic (on the
// in-memory network) while writes go on. Its Stale answers are then old,
// but marked: each is exactly the state at the revision it names. Asked
// at a revision it has not applied it answers ErrBehind, so a client that
// saw the newest write reads it (from the leader) and never older state;
// a client that saw nothing reads old state from it, monotonically. Once
// healed, it catches up.
func TestPartitionedFollowerReads(t *testing.T) {
	c := startCluster(t, 3, clusterOptions{inMemory: true, api: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	leader := c.WaitLeader()
	f := (leader + 1) % 3
	fs := c.Server(f)
	fid := fs.ID()
	others := []int{leader, (leader + 2) % 3}
	writer := c.dial(5 * time.Second)
	fconn := memberConn(t, c.Certs(), fs.ClientAddr())
	seer := dialReads(t, c.Certs(), c.endpoints(), []string{fs.ClientAddr()}, nil)
	fresh := dialReads(t, c.Certs(), c.endpoints(), []string{fs.ClientAddr()}, nil)

	var writes []ackedWrite
	set := func(v string) {
		t.Helper()
		st, err := writer.Set(ctx, "/part", []byte(v))
		if errors.Is(err, ErrUnknownOutcome) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		writes = append(writes, ackedWrite{value: v, rev: st.ModRev})
	}
	if _, err := writer.Create(ctx, "/part", nil); err != nil {
		t.Fatal(err)
	}
	set("before")
	before := writes[len(writes)-1]
	servertest.Eventually(t, fid+" applied the first write", func() error {
		_, err := staleGet(ctx, fconn, "/part", before.rev)
		return err
	})

	c.Partition([]int{f}, others)
	for i := range 20 {
		set(strconv.Itoa(i))
	}
	last := writes[len(writes)-1]
	if last.rev <= before.rev {
		t.Fatal("no write was acknowledged during the partition")
	}

	// Old, but marked with the revision it was read at.
	resp, err := staleGet(ctx, fconn, "/part", 0)
	if err := judge(writes, 0, resp, err); err != nil {
		t.Fatalf("%s cut off, Stale read: %v", fid, err)
	}
	if resp.Rev >= last.rev {
		t.Fatalf("%s cut off answered at revision %d, the last write is at %d: the partition did not hold", fid, resp.Rev, last.rev)
	}
	t.Logf("%s cut off answers %q at revision %d; the last acknowledged write is %q at %d", fid, resp.Data, resp.Rev, last.value, last.rev)
	// The HTTP API's ?stale=true is answered by the member asked, marked
	// the same way.
	hn := httpStaleGet(t, c.Certs(), fs.APIAddr(), "/part")
	if err := checkStaleAnswer(writes, 0, hn.Data, hn.Stat.ModRevision, hn.Revision, nil); err != nil {
		t.Fatalf("%s cut off, HTTP ?stale=true: %v", fid, err)
	}
	if hn.Revision >= last.rev {
		t.Fatalf("%s cut off answered ?stale=true at revision %d, the last write is at %d", fid, hn.Revision, last.rev)
	}
	// A reader that saw the last write is refused, not served older state.
	if _, err := staleGet(ctx, fconn, "/part", last.rev); !errors.Is(err, ErrBehind) {
		t.Fatalf("%s cut off, Stale read at revision %d: %v, want ErrBehind", fid, last.rev, err)
	}

	// Through the client: one that saw the last write reads it or later.
	if data, _, err := seer.Get(ctx, "/part"); err != nil || string(data) != last.value {
		t.Fatalf("linearizable read: %q, %v; want %q", data, err, last.value)
	}
	for range 20 {
		data, st, err := seer.Get(ctx, "/part", Stale())
		if err != nil {
			t.Fatal(err)
		}
		if err := checkStaleAnswer(writes, last.rev, string(data), st.ModRev, seer.Revision(), nil); err != nil {
			t.Fatalf("a client that saw revision %d read from %s's side: %v", last.rev, fid, err)
		}
	}
	// One that saw nothing reads the cut-off member's old state, marked.
	var freshReads []staleRead
	for range 20 {
		data, st, err := fresh.Get(ctx, "/part", Stale())
		if err != nil {
			t.Fatal(err)
		}
		if err := checkStaleAnswer(writes, 0, string(data), st.ModRev, fresh.Revision(), nil); err != nil {
			t.Fatalf("a new client reading from %s: %v", fid, err)
		}
		freshReads = append(freshReads, staleRead{modRev: st.ModRev, stale: true, member: fresh.ReadMember()})
	}
	if err := checkMonotonic(freshReads); err != nil {
		t.Fatal(err)
	}

	c.Heal()
	servertest.Eventually(t, fid+" caught up after the heal", func() error {
		resp, err := staleGet(ctx, fconn, "/part", last.rev)
		if err != nil {
			return err
		}
		if err := judge(writes, last.rev, resp, nil); err != nil {
			t.Fatal(err)
		}
		return nil
	})
}
