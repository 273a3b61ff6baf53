package server_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/latch-io/latch/server/proc"
)

var screenshots = flag.String("screenshots", "", "directory TestConsoleInBrowser writes its PNG screenshots to (the README's are in testdata/console)")

// findBrowser returns a Chromium-like browser on PATH, or "".
func findBrowser() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// The web console in a real headless Chromium against three real
// members, served by a follower: the tree shows a node appearing, the
// queue view shows a lock taken (with a waiter behind it, the holder
// marked contended by the watch's lock events) and released,
// the members and an election's leader are shown; all live, without
// reloading the page. While a load runs, the charts draw every series
// from the members' stats streams; the lock history view lists the
// hand-over (who held the lock, with which token, how the hold ended).
func TestConsoleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes and a browser")
	}
	browser := findBrowser()
	if browser == "" {
		t.Skip("no Chromium found on PATH (chromium, chromium-browser, google-chrome): the console's browser test needs one; .ci/run installs the Debian package chromium")
	}
	c := proc.StartCluster(t, 3)
	li := c.WaitLeader(t)
	f := c.Nodes[(li+1)%3].APIAddr
	api := newAPIClient(t, c.Certs.CA)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(browser), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("ignore-certificate-errors", true), // the cluster's dev CA is not the browser's
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1100),
	)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	wait := func(what, sel string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(wctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
			t.Fatalf("console: %s (%s): %v", what, sel, err)
		}
	}
	gone := func(what, sel string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(bctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(wctx, chromedp.WaitNotPresent(chromedp.CSS(sel))); err != nil {
			t.Fatalf("console: %s (%s): %v", what, sel, err)
		}
	}
	shot := func(name string) {
		t.Helper()
		if *screenshots == "" {
			return
		}
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100) /* 100: PNG */)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(*screenshots, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	elementShot := func(name, sel string) {
		t.Helper()
		if *screenshots == "" {
			return
		}
		png, err := chromedp.Run(bctx, chromedp.Screenshot(chromedp.CSS(sel)))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(*screenshots, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	if err := chromedp.Do(bctx, chromedp.Navigate("https://"+f+"/")); err != nil {
		t.Fatal(err)
	}
	wait("three members", `#members tbody tr:nth-child(3)[data-member]`)
	wait("a leader", `#members tbody tr[data-member] b`)
	wait("live", `#conn.ok`)

	// A bounded load through the follower while the page is open: the
	// charts must show it.
	stopLoad := make(chan struct{})
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		for i := 0; i < 100000; i++ {
			select {
			case <-stopLoad:
				return
			default:
			}
			p := fmt.Sprintf("/load-%d", i%20)
			if i < 20 {
				api.raw(f, "POST", "/api/v1/nodes"+p, map[string]any{"data": "0"})
			} else {
				api.raw(f, "PUT", "/api/v1/nodes"+p, map[string]any{"data": fmt.Sprint(i)})
			}
			api.raw(f, "GET", "/api/v1/nodes"+p, nil)
		}
	}()
	stop := sync.OnceFunc(func() {
		close(stopLoad)
		<-loadDone
	})
	defer stop()
	// Every chart draws a series of several points; those of the load
	// are above zero.
	charts(t, bctx, 5, map[string]bool{
		"writes": true, "reads": true, "p50_ms": true, "p99_ms": true, "watch_events": true,
		"sessions": false, "locks_held": false, "locks_waiting": false, "leader_changes": false,
	})
	stop() // the rest needs no load: spare the busy machine a leader change

	// The tree shows a node appearing, and its data when clicked.
	wait("the root", `#tree li[data-path="/"]`)
	api.do(201, f, "POST", "/api/v1/nodes/services", map[string]any{"data": "billing, search"})
	wait("a new node", `#tree li[data-path="/services"]`)
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`#tree li[data-path="/services"] > .name`))); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		data, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#node-data`)))
		if err != nil {
			t.Fatal(err)
		}
		if data == "billing, search" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node data shown: %q", data)
		}
		time.Sleep(20 * time.Millisecond) // polling the page with a deadline
	}

	// The queue view: a lock taken, a waiter behind it, the hand-over,
	// the release.
	a1 := api.do(200, f, "POST", "/api/v1/locks/jobs/report/acquire", map[string]any{"client_id": "worker-1", "ttl_ms": 30000})
	waited := make(chan apiReply, 1)
	go func() {
		_, out, _ := api.raw(f, "POST", "/api/v1/locks/jobs/report/acquire", map[string]any{"client_id": "worker-2", "ttl_ms": 30000, "wait_timeout_ms": 30000})
		waited <- out
	}()
	holder := fmt.Sprintf(`[data-lock="/jobs/report"] tr[data-state="held"][data-node=%q]`, a1.str("node"))
	wait("the holder", holder)
	wait("a waiter", `[data-lock="/jobs/report"] tr[data-state="waiting"]`)
	wait("the holder marked contended", holder+`[data-contended="true"]`)
	// A leader change on this busy machine may lose these two answers
	// (503): open again (a session opened twice expires unused), and
	// campaign again unless the campaign was applied after all.
	var s apiReply
	untilDone(t, "open a session", func() (bool, string) {
		code, out, err := api.raw(f, "POST", "/api/v1/sessions", map[string]any{"ttl_ms": 30000})
		s = out
		return err == nil && code == 201, fmt.Sprint(code, out, err)
	})
	untilDone(t, "campaign", func() (bool, string) {
		code, out, err := api.raw(f, "POST", "/api/v1/elections/services/billing/campaign", map[string]any{"data": "10.0.0.7:8080"}, "Latch-Session: "+s.str("token"))
		if err == nil && code == 200 {
			return true, ""
		}
		_, l, _ := api.raw(f, "GET", "/api/v1/elections/services/billing/leader", nil)
		return l.num("session_id") == s.num("session_id"), fmt.Sprint(code, out, err)
	})
	wait("the election's leader", `#elections tr[data-election="/services/billing"]`)
	// The held lock, its waiter and the sessions are charted too.
	charts(t, bctx, 2, map[string]bool{"sessions": true, "locks_held": true, "locks_waiting": true})
	shot("console.png")
	elementShot("console-charts.png", "#charts-section")
	api.do(200, f, "POST", "/api/v1/locks/jobs/report/release", map[string]any{"fencing_token": a1.num("fencing_token"), "lease_token": a1.str("lease_token")})
	var a2 apiReply
	select {
	case a2 = <-waited:
	case <-time.After(30 * time.Second):
		t.Fatal("waiter not granted")
	}
	gone("the released holder", holder)
	wait("the waiter now holding", fmt.Sprintf(`[data-lock="/jobs/report"] tr[data-state="held"][data-node=%q]`, a2.str("node")))
	api.do(201, f, "POST", "/api/v1/nodes/services/search", map[string]any{"data": "10.0.0.9:9200"})
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`#tree li[data-path="/services"] > .toggle`))); err != nil {
		t.Fatal(err)
	}
	wait("a child in the expanded tree", `#tree li[data-path="/services/search"]`)

	// The lock history: click the queue's name; worker-1's hold ended
	// with its release, worker-2 holds the lock with a larger token. The
	// API releases an implicit lease's lock by closing its session (one
	// command), so the history says session-closed, or released when a
	// leader change in between made the new leader release it instead.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`[data-lock="/jobs/report"] h3`))); err != nil {
		t.Fatal(err)
	}
	released := fmt.Sprintf(`#history tr[data-token="%d"]:is([data-end="released"], [data-end="session-closed"])`, a1.num("fencing_token"))
	held := fmt.Sprintf(`#history tr[data-token="%d"][data-end="held"]`, a2.num("fencing_token"))
	for _, sel := range []string{released, held} {
		wctx, cancel := context.WithTimeout(bctx, 20*time.Second)
		err := chromedp.Do(wctx, chromedp.WaitVisible(chromedp.CSS(sel)))
		cancel()
		if err != nil {
			shown, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`$("#history-path").value + ": " + $("#history-status").textContent + "\n" + $("#history tbody").innerHTML`))
			t.Fatalf("history view: no %s: %v; it shows %s", sel, err, shown)
		}
	}
	for sel, who := range map[string]string{released: "worker-1", held: "worker-2"} {
		got, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel+" td:nth-child(2)")))
		if err != nil {
			t.Fatal(err)
		}
		if got != who {
			t.Errorf("history row %s: holder %q, want %q", sel, got, who)
		}
	}
	order, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#history tbody tr")].map((r) => r.dataset.token)`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{fmt.Sprint(a2.num("fencing_token")), fmt.Sprint(a1.num("fencing_token"))}; len(order) != 2 || order[0] != want[0] || order[1] != want[1] {
		t.Errorf("history rows by token %v, want newest first %v", order, want)
	}
	shot("console-handover.png")
	elementShot("console-charts.png", "#charts-section")
	api.do(200, f, "POST", "/api/v1/locks/jobs/report/release", map[string]any{"fencing_token": a2.num("fencing_token"), "lease_token": a2.str("lease_token")})
	gone("the released queue", `[data-lock="/jobs/report"]`)
	api.do(200, f, "DELETE", "/api/v1/sessions/"+fmt.Sprint(s.num("session_id")), nil, "Latch-Session: "+s.str("token"))
	gone("the election's leader after its session closed", `#elections tr[data-election="/services/billing"]`)
	wait("no lock", `#no-locks`)
}

// charts waits until every chart series named draws at least minPoints
// points (2 or more) and, where want[series] is true, a value above zero.
func charts(t *testing.T, bctx context.Context, minPoints float64, want map[string]bool) {
	t.Helper()
	var state map[string][]float64
	for deadline := time.Now().Add(30 * time.Second); ; {
		var err error
		state, err = chromedp.Run(bctx, chromedp.Evaluate[map[string][]float64](`Object.fromEntries([...document.querySelectorAll("#charts path[data-series]")]
			.map((p) => [p.dataset.series, [+p.dataset.points, +p.dataset.max, p.getAttribute("d").split("L").length]]))`))
		if err != nil {
			t.Fatal(err)
		}
		ok := true
		for series, positive := range want {
			s := state[series]
			if len(s) != 3 || s[0] < minPoints || s[2] < minPoints || (positive && s[1] <= 0) {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("charts: [points, max, path segments] by series: %v; want every one of %v drawn", state, want)
		}
		time.Sleep(100 * time.Millisecond) // polling the page with a deadline
	}
}

// untilDone calls try until it reports done, for at most 30 s; what is
// its last answer, for the failure.
func untilDone(t *testing.T, name string, try func() (done bool, what string)) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		done, what := try()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", name, what)
		}
		time.Sleep(50 * time.Millisecond) // retrying with a deadline
	}
}
