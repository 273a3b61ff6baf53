package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latch-io/latch/session"
)

// TestREADMEFlow builds latchd and latch, runs `latchd --dev` in a temp
// directory on free ports, and runs the README's commands from that
// directory, so latch finds the dev CA in ./latch-data/tls without flags.
func TestREADMEFlow(t *testing.T) {
	bin := t.TempDir()
	build(t, bin, "latchd")
	build(t, bin, "latch")
	work := t.TempDir()
	clientAddr, raftAddr, httpAddr, apiAddr := freeUDP(t), freeTCP(t), freeTCP(t), freeTCP(t)

	daemon := exec.Command(filepath.Join(bin, "latchd"), "--dev",
		"--client-addr", clientAddr, "--raft-addr", raftAddr, "--http-addr", httpAddr, "--api-addr", apiAddr)
	daemon.Dir = work
	var daemonLog bytes.Buffer
	daemon.Stdout, daemon.Stderr = &daemonLog, &daemonLog
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- daemon.Wait() }()
	t.Cleanup(func() {
		daemon.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			daemon.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("latchd output:\n%s", daemonLog.String())
		}
	})
	waitReady(t, httpAddr, filepath.Join(work, "latch-data", "tls", "ca.pem"), exited)

	latch := func(args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, "latch"), append([]string{"--endpoints", clientAddr}, args...)...)
		cmd.Dir = work
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return out.String(), errb.String(), code
	}
	mustRun := func(args ...string) string {
		t.Helper()
		out, errOut, code := latch(args...)
		if code != 0 {
			t.Fatalf("latch %v: exit %d: %s", args, code, errOut)
		}
		return out
	}

	// latch create /demo hello && latch get /demo
	if out := mustRun("create", "/demo", "hello"); out != "/demo\n" {
		t.Fatalf("create printed %q", out)
	}
	if out := mustRun("get", "/demo"); out != "hello\n" {
		t.Fatalf("get printed %q, want hello", out)
	}

	// latch watch /demo prints the change made by latch set /demo x.
	watch := exec.Command(filepath.Join(bin, "latch"), "--endpoints", clientAddr, "watch", "/demo")
	watch.Dir = work
	wout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	werr, err := watch.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	defer watch.Process.Kill()
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(werr)
		for sc.Scan() {
			ready <- sc.Text()
		}
		close(ready)
	}()
	select {
	case line := <-ready:
		if !strings.HasPrefix(line, "latch: watching /demo") {
			t.Fatalf("watch said %q", line)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("watch did not start")
	}
	mustRun("set", "/demo", "x")
	events := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(wout)
		for sc.Scan() {
			events <- sc.Text()
		}
		close(events)
	}()
	select {
	case line := <-events:
		if f := strings.Fields(line); len(f) != 3 || f[0] != "data-changed" || f[1] != "/demo" {
			t.Fatalf("watch printed %q, want data-changed /demo REV", line)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("watch printed nothing after set")
	}
	watch.Process.Signal(os.Interrupt)
	if err := watch.Wait(); err != nil {
		t.Fatalf("interrupted watch: %v", err)
	}
	if out := mustRun("get", "/demo"); out != "x\n" {
		t.Fatalf("get after set printed %q", out)
	}

	// Errors: one line naming the error, exit status 1.
	_, errOut, code := latch("get", "/missing")
	if code != 1 || errOut != "latch: no node: /missing\n" {
		t.Fatalf("get /missing: exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = latch("set", "/demo", "y", "--version", "0")
	if code != 1 || !strings.HasPrefix(errOut, "latch: version mismatch") || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("set with a stale version: exit %d, stderr %q", code, errOut)
	}

	// The rest of the commands, in text and JSON.
	mustRun("create", "/demo/child", "c")
	if out := mustRun("ls", "/demo"); out != "child\n" {
		t.Fatalf("ls printed %q", out)
	}
	if out := mustRun("stat", "/demo"); !strings.Contains(out, "num_children     1") {
		t.Fatalf("stat printed %q", out)
	}
	var got struct {
		Data string `json:"data"`
		Stat struct {
			Version int64 `json:"version"`
		} `json:"stat"`
	}
	if err := json.Unmarshal([]byte(mustRun("-o", "json", "get", "/demo")), &got); err != nil || got.Data != "x" || got.Stat.Version != 1 {
		t.Fatalf("get -o json: %+v %v", got, err)
	}
	if out := mustRun("create", "--ephemeral", "--sequential", "/demo/e-"); !strings.HasPrefix(out, "/demo/e-00000000") {
		t.Fatalf("create --ephemeral --sequential printed %q", out)
	}
	// The ephemeral went with the command's session.
	if out := mustRun("ls", "/demo"); out != "child\n" {
		t.Fatalf("ls after the ephemeral's command exited: %q", out)
	}
	mustRun("rm", "-r", "/demo")
	if _, errOut, code := latch("get", "/demo"); code != 1 || !strings.HasPrefix(errOut, "latch: no node") {
		t.Fatalf("get after rm -r: exit %d %q", code, errOut)
	}
	if out := mustRun("sessions"); !strings.Contains(out, "(this command)") {
		t.Fatalf("sessions printed %q", out)
	}
	if out := mustRun("members"); !strings.Contains(out, "leader") || !strings.Contains(out, clientAddr) {
		t.Fatalf("members printed %q", out)
	}
	if out := mustRun("status"); !strings.Contains(out, "applied index") || !strings.Contains(out, " ok ") {
		t.Fatalf("status printed %q", out)
	}
}

func build(t *testing.T, dir, name string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), "github.com/latch-io/latch/cmd/"+name)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, out)
	}
}

func freeTCP(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func freeUDP(t *testing.T) string {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().String()
}

// waitReady polls latchd's /readyz (HTTPS, trusting caFile once it
// exists) until it answers 200, the daemon exits, or the deadline passes.
func waitReady(t *testing.T, httpAddr, caFile string, exited <-chan error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+httpAddr+"/readyz", nil)
		if conf, err := session.AdminTLS(caFile, "", ""); err == nil {
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: conf, DisableKeepAlives: true}}
			if resp, err := hc.Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return
				}
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("latchd exited: %v", err)
		case <-ctx.Done():
			t.Fatal("latchd never became ready")
		case <-tick.C:
		}
	}
}
