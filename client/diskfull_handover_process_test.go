package client

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// mountTmpfs mounts a tmpfs of size bytes on a new temporary directory and
// unmounts it when the test ends (after its processes, which are stopped
// by cleanups registered later). It skips the test where mounting is not
// allowed.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs for the member's data dir")
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s); the test needs mount -t tmpfs", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// TestFullLeaderHandsOver reproduces issue 27's disk-full finding on real
// processes: each member's data dir is a small tmpfs of its own, and a
// process fills the leader's. Before, the leader kept leading and served
// nothing (writes waited, new sessions were refused). Now it hands
// leadership to a member with space within a few polls: writes go on
// through the new leader, every acknowledged write is there, and once
// space returns the old leader catches up.
func TestFullLeaderHandsOver(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	const size, minFree = 400 << 20, 64 << 20
	dirs := []string{mountTmpfs(t, size), mountTmpfs(t, size), mountTmpfs(t, size)}
	c := proc.StartClusterIn(t, dirs, func(session.DevCerts, int) []string {
		return []string{"--min-free-mib", fmt.Sprint(minFree >> 20)}
	})
	leader := c.WaitLeader(t)
	if free := freeBytes(t, dirs[leader]); free < 2*minFree {
		t.Fatalf("only %d bytes free on a fresh member's %d-byte tmpfs", free, size)
	}
	cl := dialProcCluster(t, c, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*proc.WaitTimeout)
	defer cancel()
	mkdir(t, cl, "/d")

	// A writer that goes on through the hand-over; what it got
	// acknowledged must all be there at the end.
	var (
		mu    sync.Mutex
		acked []string
	)
	writeCtx, stopWriting := context.WithCancel(ctx)
	var writer sync.WaitGroup
	writer.Go(func() {
		for i := 0; writeCtx.Err() == nil && i < 100_000; i++ {
			p := fmt.Sprintf("/d/n%05d", i)
			if _, err := cl.Create(writeCtx, p, []byte(p)); err == nil {
				mu.Lock()
				acked = append(acked, p)
				mu.Unlock()
			}
		}
	})
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	proc.Eventually(t, "writes before the fill", func() error {
		if n := count(); n < 20 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})

	full := c.Nodes[leader]
	ballast := filepath.Join(dirs[leader], "ballast")
	filling := time.Now()
	fillFile(t, ballast, freeBytes(t, dirs[leader])-minFree/2)
	var next int
	proc.Eventually(t, "leadership leaves the full member", func() error {
		st, err := c.Nodes[(leader+1)%3].Status()
		if err != nil {
			return err
		}
		if st.LeaderID == "" || st.LeaderID == full.ID {
			return fmt.Errorf("leader is %q", st.LeaderID)
		}
		return nil
	})
	next = c.WaitLeader(t)
	if next == leader {
		t.Fatalf("%s still leads with a full disk", full.ID)
	}
	t.Logf("a ready leader with space %s after the fill began (the fill's own time included)", time.Since(filling).Round(time.Millisecond))
	if logs := full.Logs(); !strings.Contains(logs, "handing leadership over") {
		t.Fatalf("the full leader does not say it handed over; log tail:\n%s", tail(logs, 10))
	}
	if st, err := full.Status(); err != nil || !st.NoSpace {
		t.Fatalf("the full member's status: no_space %v, %v", st.NoSpace, err)
	}
	// Writes go on through the new leader.
	after := count()
	proc.Eventually(t, "writes through the new leader", func() error {
		if n := count(); n < after+20 {
			return fmt.Errorf("%d acknowledged since the hand-over", n-after)
		}
		return nil
	})
	if _, err := cl.Create(ctx, "/after", []byte("x")); err != nil {
		t.Fatalf("write after the hand-over: %v", err)
	}
	stopWriting()
	writer.Wait()

	// Space returns: the old leader catches up, and every acknowledged
	// write is on every member.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	waitSameApplied(t, c)
	mu.Lock()
	defer mu.Unlock()
	for _, p := range acked {
		data, _, err := cl.Get(ctx, p)
		if err != nil || string(data) != p {
			t.Fatalf("acknowledged %s: %q, %v", p, data, err)
		}
	}
	t.Logf("%d writes acknowledged, %s handed leadership to %s", len(acked), full.ID, c.Nodes[next].ID)
}
