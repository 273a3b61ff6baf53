package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latch-io/latch/session"
)

// The process tests run a client in a child process (this test binary
// re-executed with childEnv set), so that it can be killed and stopped
// for real. The child reports over stdout, one line per fact:
//
//	ready SESSION     connected, the ephemeral node created
//	done EXPIRED      its session ended; EXPIRED is errors.Is(Err, ErrSessionExpired)
//	create EXPIRED    a create on the session failed; EXPIRED as above
const (
	childEnv       = "LATCH_CLIENT_TEST_CHILD"
	childEndpoints = "LATCH_CLIENT_TEST_ENDPOINTS"
	childCA        = "LATCH_CLIENT_TEST_CA"
	childTTL       = "LATCH_CLIENT_TEST_TTL"
	childPath      = "LATCH_CLIENT_TEST_PATH"
)

func childMain() int {
	ttl, err := time.ParseDuration(os.Getenv(childTTL))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	tlsConf, err := session.ClientTLS(os.Getenv(childCA), "", "")
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, Config{
		Endpoints:  strings.Split(os.Getenv(childEndpoints), ","),
		TLS:        tlsConf,
		SessionTTL: ttl,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: dial:", err)
		return 2
	}
	defer c.Close()
	s := c.Session()
	if _, err := s.Create(ctx, os.Getenv(childPath), nil, Ephemeral()); err != nil {
		fmt.Fprintln(os.Stderr, "child: create:", err)
		return 2
	}
	fmt.Printf("ready %d\n", s.ID())
	<-s.Done()
	fmt.Printf("done %v\n", errors.Is(s.Err(), ErrSessionExpired))
	_, err = s.Create(context.Background(), os.Getenv(childPath)+"-again", nil, Ephemeral())
	fmt.Printf("create %v\n", errors.Is(err, ErrSessionExpired))
	return 0
}

// child is a running client process.
type child struct {
	cmd   *exec.Cmd
	lines chan string
}

func startChild(t *testing.T, tc *testCluster, caFile string, ttl time.Duration, path string) (*child, uint64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		childEnv+"=1",
		childEndpoints+"="+strings.Join(tc.endpoints(), ","),
		childCA+"="+caFile,
		childTTL+"="+ttl.String(),
		childPath+"="+path,
	)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := &child{cmd: cmd, lines: make(chan string, 16)}
	go func() {
		defer close(ch.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			ch.lines <- sc.Text()
		}
		io.Copy(io.Discard, out)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line := ch.next(t)
	id, err := strconv.ParseUint(strings.TrimPrefix(line, "ready "), 10, 64)
	if err != nil || !strings.HasPrefix(line, "ready ") {
		t.Fatalf("child said %q, want ready SESSION", line)
	}
	return ch, id
}

func (ch *child) next(t *testing.T) string {
	t.Helper()
	select {
	case line, ok := <-ch.lines:
		if !ok {
			t.Fatal("child exited early")
		}
		return line
	case <-time.After(30 * time.Second):
		t.Fatal("child said nothing")
	}
	return ""
}

// caFile returns the CA the test cluster's certificates chain to.
func (tc *testCluster) caFile() string { return tc.Certs().CA }

// TestKilledClientSessionExpires SIGKILLs a client process: its session
// must expire within TTL plus one heartbeat interval, deleting its
// ephemeral node, and a watcher of the node must hear of it.
func TestKilledClientSessionExpires(t *testing.T) {
	tc := startCluster(t, 3, clusterOptions{})
	c := tc.dial(5 * time.Second)
	ctx := testCtx(t)
	const ttl = 1500 * time.Millisecond
	ch, id := startChild(t, tc, tc.caFile(), ttl, "/killed")
	w, err := c.Watch(ctx, "/killed")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if st, err := c.Stat(ctx, "/killed"); err != nil || st.EphemeralOwner != id {
		t.Fatalf("child's ephemeral: %+v %v", st, err)
	}

	leaderTerm := func() uint64 {
		st, err := tc.Server(tc.WaitLeader()).Status()
		if err != nil {
			t.Fatal(err)
		}
		return st.Term
	}
	termBefore := leaderTerm()
	killed := time.Now()
	if err := ch.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, w)
	took := time.Since(killed)
	if ev.Type != EventDeleted || ev.Path != "/killed" || ev.Session != id {
		t.Fatalf("event %+v, want deleted /killed of session %d", ev, id)
	}
	// The bound holds while one leader keeps the lease table. A leader
	// change meanwhile (a loaded machine can cause one) rightly grants
	// every session a fresh TTL, so only the expiry itself is required then.
	if termAfter := leaderTerm(); termAfter != termBefore {
		t.Logf("leader changed (term %d -> %d) while waiting: expiry after %v, bound not applied", termBefore, termAfter, took)
	} else if limit := ttl + ttl/3; took > limit {
		t.Fatalf("session expired %v after the kill, want within TTL + heartbeat = %v", took, limit)
	}
	list, err := c.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.ID == id {
			t.Fatalf("session %d still listed after expiry", id)
		}
	}
	t.Logf("session expired %v after SIGKILL (TTL %v)", took, ttl)
}

// TestStoppedClientSeesExpiry SIGSTOPs a client process until the server
// has expired its session, then resumes it: the child must see Done and
// ErrSessionExpired, on the session and on a request.
func TestStoppedClientSeesExpiry(t *testing.T) {
	tc := startCluster(t, 3, clusterOptions{})
	c := tc.dial(5 * time.Second)
	ctx := testCtx(t)
	const ttl = time.Second
	ch, _ := startChild(t, tc, tc.caFile(), ttl, "/stopped")
	w, err := c.Watch(ctx, "/stopped")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := ch.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The server expires the session while the child cannot answer.
	if ev := nextEvent(t, w); ev.Type != EventDeleted {
		t.Fatalf("event %+v, want deleted", ev)
	}
	if err := ch.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if line := ch.next(t); line != "done true" {
		t.Fatalf("child: %q, want done true", line)
	}
	if line := ch.next(t); line != "create true" {
		t.Fatalf("child: %q, want create true", line)
	}
	if err := ch.cmd.Wait(); err != nil {
		t.Fatalf("child exit: %v", err)
	}
}
