package chaos

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/latch-io/latch/server/proc"
)

// The run tests start real processes: latchd members, fencedstore and
// workers (the latch binary's chaos-worker), built once per test process.
// By default they are short (one round of every fault, well under a
// minute). Long runs are opt-in: LATCH_CHAOS_LONG=1 runs random rounds for
// two minutes, -duration D for D (give go test a -timeout above it):
//
//	go test ./cmd/latch/chaos -run TestChaosRun -timeout 30m -duration 15m -v
var longRun = flag.Duration("duration", 0, "run TestChaosRun under random faults this long instead of one short round")

var bins struct {
	once                  sync.Once
	dir                   string
	latch, latchd, fenced string
	err                   error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bins.dir != "" {
		os.RemoveAll(bins.dir)
	}
	// Every goroutine of a run (poller, supervisor, process waiters, the
	// orchestrator's client) ends with it. Idle keep-alive connections of
	// the HTTP clients to stopped processes belong to net/http.
	if code == 0 {
		if err := goleak.Find(
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func buildBinaries(t *testing.T) {
	t.Helper()
	bins.once.Do(func() {
		if bins.dir, bins.err = os.MkdirTemp("", "latch-chaos-bin-"); bins.err != nil {
			return
		}
		bins.latch = filepath.Join(bins.dir, "latch")
		bins.latchd = filepath.Join(bins.dir, "latchd")
		bins.fenced = filepath.Join(bins.dir, "fencedstore")
		for pkg, out := range map[string]string{"./cmd/latch": bins.latch, "./cmd/latchd": bins.latchd, "./cmd/fencedstore": bins.fenced} {
			if bins.err = proc.GoBuild(pkg, out); bins.err != nil {
				return
			}
		}
	})
	if bins.err != nil {
		t.Fatal(bins.err)
	}
}

// testConfig is a run on fresh binaries with its output in a temp dir
// (kept and named in the log when the test fails).
func testConfig(t *testing.T) Config {
	buildBinaries(t)
	cfg := DefaultConfig()
	cfg.Out = t.TempDir()
	cfg.LatchdBin, cfg.FencedstoreBin = bins.latchd, bins.fenced
	cfg.WorkerCommand = []string{bins.latch, "chaos-worker"}
	cfg.Log = testWriter{t}
	cfg.Verbose = testing.Verbose()
	return cfg
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func logReport(t *testing.T, rep *Report, out string) {
	t.Helper()
	if rep != nil {
		t.Logf("\n%s", rep.Text())
	}
	if t.Failed() {
		// Keep the evidence of a failed run where the log says.
		keep, err := os.MkdirTemp("", "latch-chaos-failed-")
		if err == nil && os.CopyFS(keep, os.DirFS(out)) == nil {
			t.Logf("run output kept in %s", keep)
		}
	}
}

// runCaught runs cfg, which plants cfg.InjectBug, and fails t unless the
// run ends in ErrViolations naming kind. The report is logged (and the
// output of a failed test kept) when the test ends.
func runCaught(t *testing.T, cfg Config, kind string) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	t.Cleanup(func() { logReport(t, rep, cfg.Out) })
	if !errors.Is(err, ErrViolations) {
		t.Fatalf("run with %s: err = %v, want ErrViolations", cfg.InjectBug, err)
	}
	if !strings.Contains(rep.violationKinds(), kind) {
		t.Fatalf("violations %q do not name %s", rep.violationKinds(), kind)
	}
	return rep
}

func TestChaosRun(t *testing.T) {
	cfg := testConfig(t)
	cfg.Workers = 5
	cfg.MutualTLS = true            // client certificates required, ACLs enforced
	cfg.FaultInterval = time.Second // faults back to back
	cfg.Rounds = 1
	if os.Getenv("LATCH_CHAOS_LONG") != "" && *longRun == 0 {
		*longRun = 2 * time.Minute
	}
	if *longRun > 0 {
		cfg.Rounds, cfg.Duration, cfg.FaultInterval = 0, *longRun, 4*time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), *longRun+4*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	defer logReport(t, rep, cfg.Out)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, k := range FaultKinds {
		if rep.Faults[k] == 0 {
			t.Errorf("fault %s never fired", k)
		}
	}
	for _, v := range rep.Verdicts {
		if v.Status != StatusPass {
			t.Errorf("checker %s: %s (%s)", v.Checker, v.Status, v.Summary)
		}
	}
	for _, op := range []string{OpKVGet, OpKVSet, OpKVTxnCAS, OpKVTxnCreate, OpSessionOpen} {
		if rep.Operations[op][OutcomeOK] == 0 {
			t.Errorf("no successful %s: the workload did not run", op)
		}
	}
	if rep.Operations[OpRogueDelete][OutcomeFail]+rep.Operations[OpRogueLockRoot][OutcomeFail] == 0 {
		t.Errorf("the rogue worker's attacks were never refused: it did not run (%v)", rep.Operations)
	}
	// The HTTP takeover of an implicit lease and the cell map write were
	// tried (and refused: the authorization checker passed above).
	if rep.Operations[OpRogueHTTPRenew][OutcomeFail]+rep.Operations[OpRogueHTTPRelease][OutcomeFail] == 0 ||
		rep.Operations[OpRogueCellMap][OutcomeFail] == 0 {
		t.Errorf("the rogue worker never tried the HTTP takeover or the cell map write (%v)", rep.Operations)
	}
	if slices.Contains(cfg.Workloads, WorkloadLocks) && rep.Grants == 0 {
		t.Error("no lock granted")
	}
	if slices.Contains(cfg.Workloads, WorkloadElection) && rep.Elections == 0 {
		t.Error("no election won")
	}
	for _, f := range []string{FileReport, FileFaults, FileHistory, FileStore, FileSessions} {
		if _, err := os.Stat(filepath.Join(cfg.Out, f)); err != nil {
			t.Errorf("run left no %s: %v", f, err)
		}
	}
	// The files a run leaves judge the same again.
	ev, err := LoadEvidence(cfg.Out)
	if err != nil {
		t.Fatal(err)
	}
	if again := Violations(Check(ev, CheckOptions{})); len(again) != 0 {
		t.Errorf("re-check of %s found %v", cfg.Out, again)
	}
}

func TestChaosInjectedBugIsCaught(t *testing.T) {
	cfg := testConfig(t)
	cfg.InjectBug = BugSkipLock
	cfg.Workloads, cfg.Workers = []string{WorkloadLocks}, 3
	cfg.Faults, cfg.Duration = nil, 8*time.Second
	rep := runCaught(t, cfg, ViolationLostUpdate)
	if rep.Passed || !strings.Contains(rep.Text(), "FAIL: ") {
		t.Fatal("report of a failed run says it passed")
	}
	for _, f := range []string{FileReport, FileReportText, FileFaults, FileHistory, FileStore} {
		if _, err := os.Stat(filepath.Join(cfg.Out, f)); err != nil {
			t.Errorf("failed run left no %s: %v", f, err)
		}
	}
}

// TestChaosRogueAdminIsCaught: with every client without a certificate
// made an admin (the planted bug), the rogue worker's attacks succeed and
// the authorization checker fails the run.
func TestChaosRogueAdminIsCaught(t *testing.T) {
	cfg := testConfig(t)
	cfg.InjectBug = BugRogueAdmin
	cfg.Workloads, cfg.Workers = []string{WorkloadLocks, WorkloadElection}, 3
	cfg.Faults, cfg.Duration = nil, 8*time.Second
	rep := runCaught(t, cfg, ViolationUnauthorized)
	if rep.Operations[OpRogueCellMap][OutcomeOK] == 0 {
		t.Errorf("an admin rogue never wrote the cell map: the attack did not run (%v)", rep.Operations)
	}
}
