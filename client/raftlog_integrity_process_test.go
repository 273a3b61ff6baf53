package client

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/server/proc"
)

// TestDamagedRaftLogRefusesToStart reproduces issue 27's first finding on
// real processes: eight bytes flipped in the middle of an entry in a
// stopped follower's raft-wal segment. Before entries carried checksums
// the follower restarted ready and could later serve and replicate the
// damaged entry. Now it refuses to start, exits non-zero and names the
// entry and the file; the other two members go on serving and writing.
func TestDamagedRaftLogRefusesToStart(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := proc.StartCluster(t, 3)
	leader := c.WaitLeader(t)
	cl := dialProcCluster(t, c, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), proc.WaitTimeout)
	defer cancel()
	mkdir(t, cl, "/d")
	payload := func(i int) []byte {
		return bytes.Repeat([]byte(fmt.Sprintf("wal-entry-%04d-", i)), 8)
	}
	// Entries after the damaged one, so it is not in the segment's last
	// batch (which raft-wal drops at open as a torn write, see
	// server/raftstore/doc.go).
	for i := range 50 {
		if _, err := cl.Create(ctx, fmt.Sprintf("/d/n%03d", i), payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	waitSameApplied(t, c)
	f := c.Nodes[(leader+1)%3]
	if code := f.Stop(t); code != 0 {
		t.Fatalf("%s exited %d on SIGTERM", f.ID, code)
	}
	file := proc.FlipBytes(t, filepath.Join(f.DataDir, "raft-wal"), ".wal", payload(20), 8)

	f.Start(t)
	code, err := f.WaitExit(proc.WaitTimeout)
	if err != nil {
		t.Fatalf("the follower with a damaged raft log kept running: %v", err)
	}
	if code == 0 {
		t.Fatal("the follower with a damaged raft log exited 0")
	}
	logs := f.Logs()
	for _, want := range []string{"refusing to start: this member's data is damaged", "fails its checksum", filepath.Base(file)} {
		if !strings.Contains(logs, want) {
			t.Fatalf("the log does not say %q; log tail:\n%s", want, tail(logs, 10))
		}
	}
	// The others still serve the intact node and take writes.
	if data, _, err := cl.Get(ctx, "/d/n020"); err != nil || !bytes.Equal(data, payload(20)) {
		t.Fatalf("Get from the healthy members: %v (intact %v)", err, bytes.Equal(data, payload(20)))
	}
	if _, err := cl.Create(ctx, "/d/after", []byte("x")); err != nil {
		t.Fatalf("write through the healthy members: %v", err)
	}
}
