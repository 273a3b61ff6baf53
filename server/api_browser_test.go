package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/latch-io/latch/server/proc"
)

// TestAPICrossSiteInBrowser replays issue 27's attack in a real headless
// Chromium: a page served on another local port makes the browser POST to
// a member's API with fetch (no-cors, text/plain), with a CORS fetch of
// JSON, and with plain HTML forms (text/plain and urlencoded). The same
// requests to the page's own server arrive (so the browser did send
// them), and none of them creates a node or takes a lock on the member.
func TestAPICrossSiteInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes and a browser")
	}
	browser := findBrowser()
	if browser == "" {
		t.Skip("no Chromium found on PATH (chromium, chromium-browser, google-chrome): this test needs one; .ci/run installs the Debian package chromium")
	}
	c := proc.StartCluster(t, 1)
	c.WaitLeader(t)
	addr := c.Nodes[0].APIAddr
	api := newAPIClient(t, c.Certs.CA)
	api.do(200, addr, "GET", "/api/v1/health", nil)

	var mu sync.Mutex
	control := map[string]string{} // path -> Content-Type the page's own server got
	page := fmt.Sprintf(pageHTML, "https://"+addr)
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/control/") {
			mu.Lock()
			control[r.URL.Path] = r.Header.Get("Content-Type")
			mu.Unlock()
			w.Write([]byte("ok"))
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(page))
	}))
	defer evil.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(browser), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("ignore-certificate-errors", true), // the cluster's dev CA is not the browser's
		chromedp.UserDataDir(t.TempDir()),
	)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	if err := chromedp.Do(bctx, chromedp.Navigate(evil.URL+"/")); err != nil {
		t.Fatal(err)
	}
	results, err := chromedp.Run(bctx, chromedp.Evaluate[map[string]string](`attack()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the page's view: %v", results)
	mu.Lock()
	defer mu.Unlock()
	for p, ct := range map[string]string{"/control/fetch": "text/plain", "/control/form": "text/plain", "/control/urlencoded": "application/x-www-form-urlencoded"} {
		if !strings.HasPrefix(control[p], ct) {
			t.Fatalf("the browser did not send the control request %s as %s (got %v): the attack did not run", p, ct, control)
		}
	}
	for _, p := range []string{"xsite-fetch", "xsite-cors", "xsite-form"} {
		api.do(404, addr, "GET", "/api/v1/stat/"+p, nil)
	}
	if q := api.do(200, addr, "GET", "/api/v1/locks", nil).list("locks"); len(q) != 0 {
		t.Fatalf("a cross-site form took a lock: %v", q)
	}
}

// pageHTML is the hostile page; %[1]s is the member's API origin. Each
// form posts into an iframe of its own and waits for it to load (the
// member's refusal, framed or not, or the control answer), so the request
// was answered before attack() returns.
const pageHTML = `<!doctype html>
<html><body>
<script>
const API = "%[1]s";
function post(action, enctype, fields) {
  return new Promise((resolve) => {
    const name = "f" + Math.random().toString(36).slice(2);
    const frame = document.createElement("iframe");
    frame.name = name;
    document.body.appendChild(frame);
    const form = document.createElement("form");
    form.method = "POST"; form.action = action; form.enctype = enctype; form.target = name;
    for (const [k, v] of fields) {
      const input = document.createElement("input");
      input.name = k; input.value = v;
      form.appendChild(input);
    }
    document.body.appendChild(form);
    const timer = setTimeout(() => resolve("no load"), 15000);
    frame.addEventListener("load", () => { clearTimeout(timer); resolve("loaded"); });
    form.submit();
  });
}
async function attack() {
  const out = {};
  const body = '{"data":"x"}';
  out.fetch = await fetch(API + "/api/v1/nodes/xsite-fetch", {method: "POST", mode: "no-cors", body})
    .then((r) => "answered " + r.type, (e) => "failed " + e);
  out.cors = await fetch(API + "/api/v1/nodes/xsite-cors", {method: "POST", headers: {"Content-Type": "application/json"}, body})
    .then((r) => "answered " + r.status, (e) => "failed " + e);
  out.form = await post(API + "/api/v1/nodes/xsite-form", "text/plain", [['{"data":"', 'x"}']]);
  out.lock = await post(API + "/api/v1/locks/xsite-lock/acquire", "application/x-www-form-urlencoded", [["client_id", "evil"], ["ttl_ms", "60000"]]);
  out.controlFetch = await fetch("/control/fetch", {method: "POST", mode: "no-cors", body}).then((r) => "answered", (e) => "failed " + e);
  out.controlForm = await post("/control/form", "text/plain", [['{"data":"', 'x"}']]);
  out.controlUrlencoded = await post("/control/urlencoded", "application/x-www-form-urlencoded", [["client_id", "evil"]]);
  return out;
}
</script>
</body></html>`
