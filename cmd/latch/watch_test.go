package main

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/server/proc"
)

// TestWatchLocks: latch watch --locks prints a lock's grant and release
// (with holder, token and cause) next to the request node's events, in
// revision order.
func TestWatchLocks(t *testing.T) {
	c := proc.StartCluster(t, 1)
	c.WaitLeader(t)
	useCluster(t, c)
	w := exec.Command(os.Args[0], "watch", "--locks", "--children", "/jobs/w")
	w.Env = append(os.Environ(), cliChildEnv+"=1")
	stdout, err := w.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := w.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Process.Kill(); w.Wait() })
	started := bufio.NewScanner(stderr)
	if !started.Scan() || !strings.Contains(started.Text(), "watching /jobs/w") {
		t.Fatalf("watch did not start: %q", started.Text())
	}
	if code, _, errOut := runCLI("lock", "/jobs/w", "--", "true"); code != 0 {
		t.Fatalf("latch lock: exit %d: %s", code, errOut)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var got []string
	for len(got) < 4 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("watch ended after %q", got)
			}
			got = append(got, l)
		case <-time.After(proc.WaitTimeout):
			t.Fatalf("only %q", got)
		}
	}
	// children-changed (created), lock-granted, children-changed (deleted),
	// lock-released.
	want := []string{"children-changed /jobs/w ", "lock-granted /jobs/w/lock-x-", "children-changed /jobs/w ", "lock-released /jobs/w/lock-x-"}
	for i, l := range got {
		if !strings.HasPrefix(l, want[i]) {
			t.Fatalf("line %d %q, want %q...; all: %q", i, l, want[i], got)
		}
	}
	if !strings.Contains(got[1], " session=") || !strings.Contains(got[1], " token=") || strings.Contains(got[1], "token=0") ||
		!strings.Contains(got[3], " cause=released") {
		t.Fatalf("lock lines without holder, token or cause: %q", got)
	}
}
