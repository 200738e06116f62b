package main_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"rental/infra/client"
	"rental/infra/tron"
)

// browser is headless Debian chromium driving the dashboard of one dev stack, with a
// wallet stand-in in the page whose key stays in this test process.
type browser struct {
	t      *testing.T
	ctx    context.Context
	origin string // http://host:port of the edge
	shots  string // SCREENSHOTS_DIR: where `make screenshots` wants the PNGs; "" for none

	mu       sync.Mutex
	requests []string // every URL the page requested
	problems []string // console errors and uncaught exceptions
	signed   []string // messages the wallet signed
}

// chromium finds the browser. Without it the test skips on a developer machine, and
// fails under CI=true: .ci/run installs it, so there it must run.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is missing (apt-get install -y chromium); the browser tests must run in CI")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium); CI runs this test")
	return ""
}

// newBrowser starts chromium as root would need it, with a fresh profile, and the wallet
// stand-in for key: window.tron (TIP-1102) answering eth_requestAccounts, tronWeb with the
// address and trx.signMessageV2, which calls back into this process to sign.
func newBrowser(t *testing.T, origin string, key tron.PrivateKey) *browser {
	t.Helper()
	exe := chromium(t)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(exe),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelA() })
	b := &browser{t: t, ctx: ctx, origin: origin, shots: os.Getenv("SCREENSHOTS_DIR")}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	reqs := chromedp.Events(ctx, network.RequestWillBeSent)
	go func() {
		for ev, err := range reqs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.requests = append(b.requests, ev.Request.URL)
			b.mu.Unlock()
		}
	}()
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.IsException() || string(m.Type) == "error" {
				if m.Source == "network" && expectedRefusal(m.URL, m.Text) {
					continue
				}
				b.mu.Lock()
				b.problems = append(b.problems, m.String())
				b.mu.Unlock()
			}
		}
	}()
	addr := key.Address().String()
	b.do(chromedp.ExposeFunc("rentalTestWalletSign", func(_ context.Context, msg string) (string, error) {
		b.mu.Lock()
		b.signed = append(b.signed, msg)
		b.mu.Unlock()
		return key.SignMessageV2([]byte(msg))
	}))
	wallet := fmt.Sprintf(`(function () {
  var addr = %q;
  var tronWeb = { defaultAddress: { base58: addr }, trx: { signMessageV2: function (m) { return window.rentalTestWalletSign(m); } } };
  window.tron = { isTronLink: true, tronWeb: tronWeb, request: function (a) {
    return a && a.method === "eth_requestAccounts" ? Promise.resolve([addr]) : Promise.reject({ code: 4200, message: "unsupported" }); } };
  window.confirm = function () { return true; };
})();`, addr)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: wallet}); err != nil {
		t.Fatal(err)
	}
	return b
}

// expectedRefusal tells the API answers chromium logs as failed loads that the page asks
// for knowingly and handles: GET /v1/session answering 401 (not signed in, at start and
// after revoke-all), a 429 (the page waits Retry-After and sends it again), and the market
// board answering 501 or 404 on a deployment without it (the page says "not available").
// Any other failed load is an error of the test.
func expectedRefusal(u, text string) bool {
	p, err := url.Parse(u)
	if err != nil {
		return false
	}
	switch {
	case p.Path == "/v1/session" && strings.Contains(text, "status of 401"):
		return true
	case strings.Contains(text, "status of 429"):
		return true
	case (p.Path == "/v1/market" || p.Path == "/v1/market/history") && (strings.Contains(text, "status of 501") || strings.Contains(text, "status of 404")):
		return true
	}
	return false
}

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 40*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		shown, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string]("document.getElementById('main').innerText"))
		b.t.Fatalf("browser: %v; the page shows:\n%s", err, shown)
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(sel))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func eval[T any](b *browser, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// waitFor polls the JavaScript predicate until it is true.
func (b *browser) waitFor(what, js string, within time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, within+5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingInterval(200*time.Millisecond), chromedp.WithPollingTimeout(within))); err != nil {
		html, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string]("document.getElementById('main').innerText"))
		b.t.Fatalf("%s: %v; the page shows:\n%s", what, err, html)
	}
}

// screen opens a screen by its address and waits for its heading.
func (b *browser) screen(hash, ready string) {
	b.t.Helper()
	b.do(chromedp.Evaluate[chromedp.Void]("location.hash = " + fmt.Sprintf("%q", hash)))
	b.do(chromedp.WaitVisible(ready))
}

// shot writes the screen at desktop and phone width (and the phone in dark mode) when
// SCREENSHOTS_DIR is set.
func (b *browser) shot(name string) {
	b.t.Helper()
	if b.shots == "" {
		return
	}
	if err := os.MkdirAll(b.shots, 0o755); err != nil {
		b.t.Fatal(err)
	}
	for _, v := range []struct {
		name   string
		w, h   int64
		scheme string
	}{{"desktop", 1280, 900, "light"}, {"phone", 390, 844, "light"}, {"phone-dark", 390, 844, "dark"}} {
		if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: v.scheme}}}); err != nil {
			b.t.Fatal(err)
		}
		b.do(chromedp.EmulateViewport(v.w, v.h), chromedp.Sleep(300*time.Millisecond))
		ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		cancel()
		if err != nil {
			b.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(b.shots, name+"-"+v.name+".png"), png, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
	if _, err := chromedp.Call(b.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{}); err != nil {
		b.t.Fatal(err)
	}
	b.do(chromedp.EmulateViewport(1280, 900))
}

// checkClean fails if the page asked another host for anything or logged an error.
func (b *browser) checkClean() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range b.requests {
		u, err := url.Parse(r)
		if err != nil || (u.Scheme != "data" && "http://"+u.Host != b.origin) {
			b.t.Errorf("the page requested %s, not on %s", r, b.origin)
		}
	}
	if len(b.requests) == 0 {
		b.t.Error("no request seen: the request log is broken")
	}
	for _, p := range b.problems {
		b.t.Errorf("console: %s", p)
	}
}

// TestDashboardInBrowser drives the dashboard in headless chromium against the dev stack
// (real edge, Postgres, Redis, Kafka, order pipeline and simulated chain): sign in with
// the wallet, see the deposit address and, after a deposit on the chain, the balance to
// the SUN; place an order and watch it become active; create an API key and see its secret
// exactly once; register a webhook and test it; sign out everywhere. The page requests
// nothing from another host and logs no error. With SCREENSHOTS_DIR set (make screenshots)
// it also saves every screen at desktop and phone width.
func TestDashboardInBrowser(t *testing.T) {
	chromium(t)
	e := e2eStack(t, "WEBHOOK_ALLOW_LOOPBACK=true")
	c := e.c
	wallet, err := tron.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, "http://"+e.s.api, wallet)

	// The page: strict headers.
	r := c.api("GET", "/", nil)
	if r.status != 200 || !strings.Contains(r.header.Get("Content-Security-Policy"), "default-src 'self'") ||
		!strings.Contains(r.header.Get("Content-Security-Policy"), "frame-ancestors 'none'") || r.header.Get("X-Request-Id") == "" {
		t.Fatalf("GET /: %d, headers %v", r.status, r.header)
	}

	// 1. Sign in: the wallet signs the server's challenge; the page lands on Overview.
	b.do(chromedp.Navigate(b.origin+"/"), chromedp.WaitVisible("#signin"))
	b.shot("signin")
	b.do(chromedp.Click("#signin"))
	b.do(chromedp.WaitVisible("#available-sun"))
	b.mu.Lock()
	if len(b.signed) != 1 || !strings.Contains(b.signed[0], wallet.Address().String()) {
		t.Errorf("the wallet signed %q, want one challenge naming the address", b.signed)
	}
	b.mu.Unlock()
	if got := b.text("#available-sun"); got != "0 SUN" {
		t.Fatalf("a new account shows %q available", got)
	}

	// 2. Deposit address with its QR code; a deposit on the chain shows to the SUN.
	addr := b.text(`code.address[data-currency="TRX"]`)
	if len(addr) != 34 || addr[0] != 'T' {
		t.Fatalf("TRX deposit address %q", addr)
	}
	if n := eval[int](b, `document.querySelectorAll('.deposit svg.qr path').length`); n < 2 {
		t.Fatalf("%d QR codes drawn, want one per deposit address", n)
	}
	// A label with markup shows as text.
	label := `<img src=//evil.example/x onerror=alert(1)>`
	b.do(chromedp.SetValue("#account-label", label), chromedp.Click(`#label-form button[type=submit]`))
	b.waitFor("label saved", fmt.Sprintf(`document.getElementById('account-label-shown') && document.getElementById('account-label-shown').textContent === %q`, label), 10*time.Second)
	if eval[bool](b, `document.querySelector('#main img') !== null`) {
		t.Fatal("the account label was rendered as markup")
	}
	const deposit = 100_123_456
	c.want(c.sim("POST", "/sim/trx/transfer", map[string]any{"to": addr, "amount_sun": deposit}), 200, "sim deposit")
	b.waitFor("deposit shown on Overview", `(function () {
  var el = document.getElementById('available-sun');
  if (el && el.textContent === '100,123,456 SUN') { return true; }
  var btn = document.getElementById('refresh-overview');
  if (btn && (!window.__r || Date.now() - window.__r > 700)) { window.__r = Date.now(); btn.click(); }
  return false;
})()`, 30*time.Second)
	if got := b.text("#available-trx"); got != "100.123456 TRX" {
		t.Errorf("available %q, want 100.123456 TRX", got)
	}
	b.shot("overview")

	// 3. An order placed in the page becomes active.
	receiver := e.newReceiver()
	eventually(t, 15*time.Second, "GET /v1/prices answers 200", func() bool { return c.api("GET", "/v1/prices", nil).status == 200 })
	b.screen("#new", "#new-order")
	b.do(chromedp.SetValue("#new-amount", "65000"), chromedp.SetValue("#new-tier", "5m"), chromedp.SendKeys("#new-receiver", receiver))
	b.do(chromedp.WaitVisible("#estimate-total"))
	b.shot("new-order")
	b.do(chromedp.DoubleClick("#place-order"))
	b.waitFor("order page", `location.hash.indexOf('#order/') === 0 && !!document.getElementById('order-status')`, 20*time.Second)
	b.waitFor("order active", `(function () {
  var el = document.getElementById('order-status');
  if (el && el.textContent === 'active') { return true; }
  var btn = document.getElementById('refresh-order');
  if (btn && (!window.__r || Date.now() - window.__r > 700)) { window.__r = Date.now(); btn.click(); }
  return false;
})()`, 40*time.Second)
	b.shot("order")
	b.screen("#orders", "#orders-table")
	b.waitFor("orders list", `document.querySelectorAll('#orders-table tbody tr').length > 0`, 10*time.Second)
	if n := eval[int](b, `document.querySelectorAll('#orders-table tbody tr').length`); n != 1 {
		t.Fatalf("%d orders listed after a double click, want 1", n)
	}
	b.shot("orders")

	// 4. An API key: scopes chosen by hand, the secret shown once.
	b.screen("#keys", "#key-form")
	if n := eval[int](b, `document.querySelectorAll('#key-form input[type=checkbox]:checked').length`); n != 0 {
		t.Fatalf("%d scopes preselected", n)
	}
	b.do(chromedp.Click(`input[name="scope-account.read"]`), chromedp.Click(`input[name="scope-orders.read"]`), chromedp.Click(`input[name="scope-orders.write"]`),
		chromedp.SetValue("#key-label", "from the browser"), chromedp.Click(`#key-form button[type=submit]`))
	secret := b.text("#key-secret .secret-value")
	keyID := eval[string](b, `document.querySelector('#keys-table tr[data-key]').getAttribute('data-key')`)
	if !strings.HasPrefix(secret, "sk_live_") || !strings.HasPrefix(keyID, "ak_live_") {
		t.Fatalf("key %q secret of %d characters", keyID, len(secret))
	}
	c.key = client.New("http://"+c.s.api, keyID, secret, client.WithHTTPClient(c.http))
	if bal := c.balance(); bal.BalanceSun+bal.ReservedSun == 0 {
		t.Fatalf("the new key reads balance %+v", bal)
	}
	b.shot("keys")
	b.do(chromedp.Click("#key-secret .secret-done"))
	seen := `(function (s) { return document.documentElement.outerHTML.indexOf(s) >= 0 || location.href.indexOf(s) >= 0 ||
  JSON.stringify(localStorage).indexOf(s) >= 0 || JSON.stringify(sessionStorage).indexOf(s) >= 0 || JSON.stringify(history.state).indexOf(s) >= 0; })(` + fmt.Sprintf("%q", secret) + `)`
	if eval[bool](b, seen) {
		t.Fatal("the secret is still in the page or its storage after it was dismissed")
	}
	b.do(chromedp.Reload(), chromedp.WaitVisible("#keys-table"))
	if eval[bool](b, seen) {
		t.Fatal("the secret shows again after a reload")
	}

	// 4b. A transaction relayed with that key (POST /v1/transactions): its order page shows
	// the transaction, its result and the explorer link.
	relayed := c.relayTransfer(t)
	b.screen("#order/"+relayed, "#order-status")
	b.waitFor("relayed transaction ran", `(function () {
  var el = document.getElementById('order-tx-status');
  if (el && el.textContent === 'Ran: succeeded') { return true; }
  var btn = document.getElementById('refresh-order');
  if (btn && (!window.__r || Date.now() - window.__r > 700)) { window.__r = Date.now(); btn.click(); }
  return false;
})()`, 40*time.Second)
	if n := eval[int](b, `document.querySelectorAll('#order-transaction a, #order-transaction code').length`); n == 0 {
		t.Fatal("the relayed transaction's id is not shown on its order page")
	}
	b.shot("order-relayed")

	// 5. A webhook registered and tested: the page shows what the receiver answered.
	var hits atomic.Int32
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Header.Get("X-Delivery-Attempt") == "1" {
			hits.Add(1)
		}
		_, _ = io.WriteString(w, "hello from the <b>receiver</b>")
	}))
	defer recv.Close()
	b.screen("#webhooks", "#hook-form")
	b.do(chromedp.SetValue("#hook-url", recv.URL+"/hooks"), chromedp.Click(`#hook-form button[type=submit]`))
	b.do(chromedp.WaitVisible("#hook-secret"))
	if s := b.text("#hook-secret .secret-value"); !strings.HasPrefix(s, "whsec_") {
		t.Fatalf("webhook secret %q", s)
	}
	b.do(chromedp.Click(".hook .actions button"))
	b.do(chromedp.WaitVisible(".test-result"))
	if got := b.text(".test-body"); got != "hello from the <b>receiver</b>" {
		t.Errorf("the page shows the receiver's answer as %q", got)
	}
	if !strings.Contains(b.text(".test-result"), "delivered") || hits.Load() != 1 {
		t.Errorf("test delivery: page %q, receiver saw %d", b.text(".test-result"), hits.Load())
	}
	b.shot("webhooks")

	// The remaining screens.
	b.screen("#subs", "#sub-form")
	b.shot("subscriptions")
	b.screen("#market", "#market-board")
	// Savings are shown as the percentage of the API's fraction (savings_pct 0.55 is "55 %").
	var board struct {
		Providers []struct {
			SavingsPct *float64 `json:"savings_pct"`
		} `json:"providers"`
	}
	c.want(c.api("GET", "/v1/market", nil), 200, "GET /v1/market").decode(t, &board)
	cells := eval[[]string](b, `Array.from(document.querySelectorAll('#market-board tbody tr')).map(function (r) { return r.cells[2].textContent; })`)
	if len(cells) != len(board.Providers) {
		t.Fatalf("market board: %d rows in the page, %d from the API", len(cells), len(board.Providers))
	}
	for i, p := range board.Providers {
		if p.SavingsPct != nil && cells[i] != fmt.Sprintf("%d %%", int(math.Round(*p.SavingsPct*100))) {
			t.Errorf("market board row %d: savings %q for savings_pct %v", i, cells[i], *p.SavingsPct)
		}
	}
	b.shot("market")

	// 6. Sign out everywhere: the page returns to sign-in and the session is gone.
	b.screen("#security", "#revoke-all")
	if n := eval[int](b, `document.querySelectorAll('#history tbody tr').length`); n != 1 {
		t.Errorf("sign-in history lists %d sign-ins, want 1", n)
	}
	b.shot("signins")
	b.do(chromedp.Click("#revoke-all"), chromedp.WaitVisible("#signin"))
	if st := eval[int](b, `fetch('/v1/session').then(function (r) { return r.status; })`); st != 401 {
		t.Fatalf("GET /v1/session after revoke-all: %d", st)
	}
	b.checkClean()
}
