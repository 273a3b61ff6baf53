package server_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
// reloading the page.
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

	if err := chromedp.Do(bctx, chromedp.Navigate("https://"+f+"/")); err != nil {
		t.Fatal(err)
	}
	wait("three members", `#members tbody tr:nth-child(3)[data-member]`)
	wait("a leader", `#members tbody tr[data-member] b`)
	wait("live", `#conn.ok`)

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
	s := api.do(201, f, "POST", "/api/v1/sessions", map[string]any{"ttl_ms": 30000})
	api.do(200, f, "POST", "/api/v1/elections/services/billing/campaign", map[string]any{"data": "10.0.0.7:8080"}, "Latch-Session: "+s.str("token"))
	wait("the election's leader", `#elections tr[data-election="/services/billing"]`)
	shot("console.png")
	api.do(200, f, "POST", "/api/v1/locks/jobs/report/release", map[string]any{"client_id": "worker-1", "fencing_token": a1.num("fencing_token")})
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
	shot("console-handover.png")
	api.do(200, f, "POST", "/api/v1/locks/jobs/report/release", map[string]any{"client_id": "worker-2", "fencing_token": a2.num("fencing_token")})
	gone("the released queue", `[data-lock="/jobs/report"]`)
	api.do(200, f, "DELETE", "/api/v1/sessions/"+fmt.Sprint(s.num("session_id")), nil, "Latch-Session: "+s.str("token"))
	gone("the election's leader after its session closed", `#elections tr[data-election="/services/billing"]`)
	wait("no lock", `#no-locks`)
}
