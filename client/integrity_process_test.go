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

// TestDamagedFollowerRefusesToStart reproduces both reported findings on
// real processes: bytes flipped in a stopped follower's table (.sst) and,
// separately, in its value log (.vlog). Before checksums were verified the
// follower restarted ready and served wrong bytes (from the table) or
// failed half its reads (from the value log). Now it refuses to start,
// exits non-zero and says why in one log line; the other two members go
// on serving the intact data.
func TestDamagedFollowerRefusesToStart(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	for _, tc := range []struct {
		ext  string
		size int // node data size: small stays in tables, large goes to the value log
	}{
		{".sst", 40},
		{".vlog", 8 << 10},
	} {
		t.Run(strings.TrimPrefix(tc.ext, "."), func(t *testing.T) {
			c := proc.StartCluster(t, 3)
			leader := c.WaitLeader(t)
			cl := dialProcCluster(t, c, 5*time.Second)
			ctx, cancel := context.WithTimeout(context.Background(), proc.WaitTimeout)
			defer cancel()
			mkdir(t, cl, "/d")
			payload := func(i int) []byte {
				p := []byte(fmt.Sprintf("node-%04d-", i))
				return bytes.Repeat(p, tc.size/len(p)+1)[:tc.size]
			}
			for i := range 100 {
				if _, err := cl.Create(ctx, fmt.Sprintf("/d/n%03d", i), payload(i)); err != nil {
					t.Fatal(err)
				}
			}
			waitSameApplied(t, c)
			f := c.Nodes[(leader+1)%3]
			if code := f.Stop(t); code != 0 {
				t.Fatalf("%s exited %d on SIGTERM", f.ID, code)
			}
			proc.FlipByte(t, filepath.Join(f.DataDir, "fsm"), tc.ext, payload(42)[:24])

			f.Start(t)
			code, err := f.WaitExit(proc.WaitTimeout)
			if err != nil {
				t.Fatalf("the damaged follower kept running: %v", err)
			}
			if code == 0 {
				t.Fatalf("the damaged follower exited 0")
			}
			if logs := f.Logs(); !strings.Contains(logs, "refusing to start: this member's data is damaged") {
				t.Fatalf("no clear log line; log tail:\n%s", tail(logs, 10))
			}
			// The others still serve the intact node.
			data, _, err := cl.Get(ctx, "/d/n042")
			if err != nil || !bytes.Equal(data, payload(42)) {
				t.Fatalf("Get from the healthy members: %v (intact %v)", err, bytes.Equal(data, payload(42)))
			}
		})
	}
}

// TestDamageUnderARunningFollowerStopsIt flips a value-log byte under a
// running follower; the next write that makes it read that value stops it
// (exit status 1, one log line) instead of it recording the write as
// applied with a different outcome than the others.
func TestDamageUnderARunningFollowerStopsIt(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	c := proc.StartCluster(t, 3)
	leader := c.WaitLeader(t)
	cl := dialProcCluster(t, c, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), proc.WaitTimeout)
	defer cancel()
	big := bytes.Repeat([]byte("running-value-log-data."), 400)
	if _, err := cl.Create(ctx, "/big", big); err != nil {
		t.Fatal(err)
	}
	waitSameApplied(t, c)
	f := c.Nodes[(leader+1)%3]
	proc.FlipByte(t, filepath.Join(f.DataDir, "fsm"), ".vlog", big[:46])
	if _, err := cl.Set(ctx, "/big", []byte("new")); err != nil {
		t.Fatal(err)
	}
	code, err := f.WaitExit(proc.WaitTimeout)
	if err != nil {
		t.Fatalf("the damaged follower kept running: %v", err)
	}
	if code != 1 {
		t.Fatalf("exit status %d, want 1", code)
	}
	if logs := f.Logs(); !strings.Contains(logs, "this member stops serving") {
		t.Fatalf("no clear log line; log tail:\n%s", tail(logs, 10))
	}
	if data, _, err := cl.Get(ctx, "/big"); err != nil || string(data) != "new" {
		t.Fatalf("Get from the healthy members: %q %v", data, err)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
