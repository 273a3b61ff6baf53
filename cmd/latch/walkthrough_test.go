package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latch-io/latch/server/proc"
)

// walkthroughScript is the README's cluster walk-through, also a file so
// that an operator can run it.
const walkthroughScript = "../../testdata/deploy/walkthrough.sh"

// TestREADMEWalkthrough runs the README's walk-through as written: the
// README's block must be testdata/deploy/walkthrough.sh byte for byte, and
// that script, run with freshly built latchd and latch on PATH and ports
// picked now, must go from nothing to a 3-member TLS cluster, add a learner
// and promote it, take a backup, restore it into a new cluster and remove
// a member.
func TestREADMEWalkthrough(t *testing.T) {
	script, err := os.ReadFile(walkthroughScript)
	if err != nil {
		t.Fatal(err)
	}
	block := proc.READMEBlock(t, "testdata/deploy/walkthrough.sh", "sh")
	if block != string(script) {
		t.Fatalf("the README's walk-through differs from %s: copy the file into the README block", walkthroughScript)
	}
	if testing.Short() {
		t.Skip("-short: the walk-through starts seven latchd processes")
	}

	bin := t.TempDir()
	build(t, bin, "latchd")
	build(t, bin, "latch")
	base := freePortBlock(t, 7)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", walkthroughScript)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		fmt.Sprintf("BASE=%d", base), "DIR="+t.TempDir())
	for _, k := range []string{"LATCH_ENDPOINTS", "LATCH_CA", "LATCH_CERT", "LATCH_KEY", "LATCH_ADMIN", "LATCH_CONFIG"} {
		cmd.Env = append(cmd.Env, k+"=") // only what the script sets
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	// The script's trap stops its members; anything left of the group goes.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if err != nil {
		t.Fatalf("walk-through failed: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"learner", "4 voters: an even number", "(checked)", "restored backup.latch", "\nv2\n", "walkthrough done",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("walk-through output lacks %q:\n%s", want, got)
		}
	}
	final := got[strings.LastIndex(got, "ID  ROLE"):]
	if strings.Contains(final, "n4") || strings.Count(final, "\nn") != 3 {
		t.Errorf("after member remove n4, the member list is\n%s", final)
	}
}

// freePortBlock returns a base port such that base+10n .. base+10n+3 are
// free on loopback (TCP and UDP) for n in 1..members, as the walk-through
// uses them.
func freePortBlock(t *testing.T, members int) int {
	t.Helper()
	for range 50 {
		base := 20000 + 10*rand.IntN(3500)
		if portsFree(base, members) {
			return base
		}
	}
	t.Fatal("no free block of ports for the walk-through")
	return 0
}

func portsFree(base, members int) bool {
	var closers []func() error
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	for n := 1; n <= members; n++ {
		for k := range 4 {
			addr := fmt.Sprintf("127.0.0.1:%d", base+10*n+k)
			l, err := net.Listen("tcp", addr)
			if err != nil {
				return false
			}
			closers = append(closers, l.Close)
			u, err := net.ListenPacket("udp", addr)
			if err != nil {
				return false
			}
			closers = append(closers, u.Close)
		}
	}
	return true
}
