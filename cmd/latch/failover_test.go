package main

import (
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latch-io/latch/server"
	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/server/servertest"
	"github.com/latch-io/latch/session"
)

// TestCommandsDuringFailover starts 20 latch commands at random moments
// within 2s after the leader of three latchd processes is killed: every
// one succeeds within its --timeout (10s). A command started before the
// new leader is elected waits for it instead of failing on the dead
// leader's name.
func TestCommandsDuringFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts latchd processes")
	}
	cl := proc.StartCluster(t, 3)
	leader := cl.WaitLeader(t)
	flags := []string{"--endpoints", strings.Join(cl.ClientAddrs(), ","), "--ca", cl.Certs.CA, "--timeout", "10s"}
	if code, _, errOut := runCLI(append(flags, "create", "/cli")...); code != 0 {
		t.Fatalf("create /cli: %s", errOut)
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	at := make([]time.Duration, 20)
	for i := range at {
		at[i] = time.Duration(rng.Int64N(int64(2 * time.Second)))
	}

	cl.Nodes[leader].Kill(t)
	killed := time.Now()
	var wg sync.WaitGroup
	errs := make([]string, len(at))
	for i, d := range at {
		wg.Go(func() {
			time.Sleep(time.Until(killed.Add(d))) // the command's start moment, not a wait for a condition
			args := []string{"create", fmt.Sprintf("/cli/c%d", i)}
			if i%2 == 1 {
				args = []string{"ls", "/cli"}
			}
			start := time.Now()
			code, _, errOut := runCLI(append(append([]string(nil), flags...), args...)...)
			if code != 0 {
				errs[i] = fmt.Sprintf("%v started %v after the kill: exit %d after %v: %s", args, d, code, time.Since(start), strings.TrimSpace(errOut))
			} else {
				t.Logf("%v started %v after the kill: done in %v", args, d.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
			}
		})
	}
	wg.Wait()
	for _, e := range errs {
		if e != "" {
			t.Error(e)
		}
	}
}

// TestUnfixableErrorsFailFastWithHint: errors no retry can fix end the
// command at once (not at --timeout, whose error would say "deadline")
// with a hint naming what to change.
func TestUnfixableErrorsFailFastWithHint(t *testing.T) {
	c := servertest.StartCluster(t, 1, &servertest.Options{
		Configure: func(i int, cfg *server.Config) { cfg.TLSClientCA = "" },
	})
	c.WaitLeader()
	addr := c.Server(0).ClientAddr()
	other, err := session.EnsureDevCerts(filepath.Join(t.TempDir(), "other"))
	if err != nil {
		t.Fatal(err)
	}
	mtls := servertest.StartCluster(t, 1, &servertest.Options{
		Configure: func(i int, cfg *server.Config) { cfg.TLSClientCA = other.CA },
	})
	mtls.WaitLeader()
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := udp.LocalAddr().String()
	udp.Close() // nothing listens there now

	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"UnknownCA", []string{"--endpoints", addr, "--ca", other.CA},
			[]string{"not trusted", other.CA, "--ca"}},
		{"CertificateRequired", []string{"--endpoints", mtls.Server(0).ClientAddr(), "--ca", mtls.Certs().CA},
			[]string{"client certificate", "--cert", "--key"}},
		{"NothingListening", []string{"--endpoints", closed},
			[]string{"nothing listening", closed, "is latchd running"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := runCLI(append(tc.args, "--timeout", "20s", "get", "/")...)
			if code != 1 {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q lacks %q", errOut, w)
				}
			}
			if strings.Contains(errOut, "deadline") {
				t.Errorf("stderr %q: failed at --timeout, not at once", errOut)
			}
		})
	}
}
