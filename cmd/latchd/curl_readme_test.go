package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/server/proc"
)

// The README's curl walk-through, run as written against latchd --dev:
// `curl -N` on a watch in one shell, acquire, renew and release in
// another; the watch shows the lock's request node come and go.
func TestREADMECurlWalkthrough(t *testing.T) {
	if testing.Short() {
		t.Skip("real process")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed: the README's curl walk-through needs it")
	}
	watchScript, lockScript := proc.READMEBlock(t, "curl-walkthrough:watch", "sh"), proc.READMEBlock(t, "curl-walkthrough:lock", "sh")
	n := proc.StartNode(t, proc.Options{Args: []string{"--dev"}})
	n.WaitReady(t)
	// The README runs next to latchd --dev, whose data dir is ./latch-data.
	work := t.TempDir()
	if err := os.Symlink(n.DataDir, filepath.Join(work, "latch-data")); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "API=https://"+n.APIAddr, "JOBS=jobs") // the README's first block sets both
	shell := func(script string, out *proc.Output) *exec.Cmd {
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = work, env, out, out
		return cmd
	}
	waitOutput := func(what string, out *proc.Output, cond func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !cond(out.String()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not in the output:\n%s", what, out.String())
			}
			time.Sleep(10 * time.Millisecond) // polling the output with a deadline
		}
	}

	var watchOut proc.Output
	watch := shell(watchScript, &watchOut)
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { watch.Process.Kill(); watch.Wait() }()
	waitOutput("the watch's ready event", &watchOut, func(s string) bool { return strings.Contains(s, "event: ready") })

	var lockOut proc.Output
	if err := shell(lockScript, &lockOut).Run(); err != nil {
		t.Fatalf("lock commands: %v\n%s", err, lockOut.String())
	}
	out := lockOut.String()
	for _, want := range []string{`"acquired": true`, `"fencing_token": `, `"expires_at": `, `"renewed": true`, `"new_expires_at": `, `"released": true`} {
		if !strings.Contains(out, want) {
			t.Fatalf("lock commands' output lacks %s:\n%s", want, out)
		}
	}
	node := regexp.MustCompile(`"node": "([^"]+)"`).FindStringSubmatch(out)
	if node == nil {
		t.Fatalf("no request node in:\n%s", out)
	}
	waitOutput("the lock's node created and deleted", &watchOut, func(s string) bool {
		return strings.Contains(s, `{"type":"created","path":"`+node[1]+`"`) && strings.Contains(s, `{"type":"deleted","path":"`+node[1]+`"`)
	})
}
