package bench

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/latch-io/latch/client"
	"github.com/latch-io/latch/server/proc"
	"github.com/latch-io/latch/session"
)

// TestStormStallsLeaderDisk runs storm --kill stall against three latchd
// processes started with --fault-injection: without an admin certificate
// the leader refuses the fault and the run fails saying so; with one,
// the leader's raft log writes stall, the member fails on the stuck write
// and exits, another member leads, and every held session is back on it,
// none lost. It asserts no timings.
func TestStormStallsLeaderDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("starts latchd processes")
	}
	cl := proc.StartCluster(t, 3, "--fault-injection", "--storage-stall-timeout", "2s")
	leader := cl.WaitLeader(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	storm := func(conf session.DevCerts, admin bool) (*Report, error) {
		cert, key := "", ""
		if admin {
			var err error
			if cert, key, err = conf.Client(proc.AdminName); err != nil {
				t.Fatal(err)
			}
		}
		tlsConf, err := session.ClientTLS(conf.CA, cert, key)
		if err != nil {
			t.Fatal(err)
		}
		return Run(ctx, Config{Scenario: ScenarioStorm, Sessions: 20, Concurrency: 8, Window: time.Second,
			Kill: "stall", Observe: 10 * time.Second, OpTimeout: 10 * time.Second,
			Client: client.Config{Endpoints: cl.ClientAddrs(), TLS: tlsConf, SessionTTL: 10 * time.Second}})
	}

	// A member that refuses the fault (here: the run has no admin
	// certificate) fails the run, which names the flag to check.
	if _, err := storm(cl.Certs, false); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "--fault-injection") {
		t.Fatalf("storm without an admin certificate: %v, want ErrBadConfig naming --fault-injection", err)
	}
	if !cl.Nodes[leader].Running() {
		t.Fatalf("the leader %s exited after a refused fault", cl.Nodes[leader].ID)
	}

	leader = cl.WaitLeader(t)
	rep, err := storm(cl.Certs, true)
	if err != nil {
		t.Fatalf("storm --kill stall: %v", err)
	}
	k := rep.Storm.Kill
	if k == nil || k.Signal != "stall" || k.Leader != cl.Nodes[leader].ID {
		t.Fatalf("kill %+v, want a stall of the leader %s", k, cl.Nodes[leader].ID)
	}
	if k.NewLeader == "" || k.NewLeader == k.Leader || k.LeaderChanges < 1 {
		t.Errorf("stalled %s, new leader %q after %d leader changes", k.Leader, k.NewLeader, k.LeaderChanges)
	}
	if k.Lost != 0 || k.Failed != 0 || k.Reconnect.Count != 20 {
		t.Errorf("%d sessions lost, %d first calls failed, %d back; want 0, 0, 20", k.Lost, k.Failed, k.Reconnect.Count)
	}
	if k.Write <= 0 || k.LeaderExit <= 0 {
		t.Errorf("write after the stall %v, stalled leader exited after %v: want both", k.Write, k.LeaderExit)
	}
	code, err := cl.Nodes[leader].WaitExit(proc.WaitTimeout)
	if err != nil || code != 1 {
		t.Fatalf("the stalled leader: exit %d, %v; want exit 1", code, err)
	}
	if logs := cl.Nodes[leader].Logs(); !strings.Contains(logs, "storage stopped answering") {
		t.Errorf("the stalled leader's log does not say why")
	}
}

// TestFreezeOnlyOwnFileSystem: --kill freeze refuses a data dir that is
// not a file system of its own (freezing /tmp's or / would stop every
// process writing there), before any fsfreeze, and names LOOPFS=1; it
// finds the data dir from the process's command line. A check that
// compared the wrong devices, or skipped the parent, would accept t.TempDir().
func TestFreezeOnlyOwnFileSystem(t *testing.T) {
	for _, dir := range []string{t.TempDir(), "/"} {
		if err := ownMount(dir); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "LOOPFS=1") {
			t.Errorf("ownMount(%s) = %v, want ErrBadConfig naming LOOPFS=1", dir, err)
		}
	}
	if err := ownMount("/proc"); err != nil {
		t.Errorf("ownMount(/proc), a mount point: %v", err)
	}
	// This test process has no --data-dir.
	if _, err := dataMount(os.Getpid()); !errors.Is(err, ErrBadConfig) || !strings.Contains(err.Error(), "--data-dir") {
		t.Errorf("dataMount(self) = %v, want ErrBadConfig naming --data-dir", err)
	}
	if err := (Config{Scenario: ScenarioStorm, Kill: "freeze"}).Validate(); err != nil {
		t.Errorf("--kill freeze: %v", err)
	}
	if err := (Config{Scenario: ScenarioStorm, Kill: "thaw"}).Validate(); !errors.Is(err, ErrBadConfig) {
		t.Errorf("--kill thaw: %v, want ErrBadConfig", err)
	}
}
