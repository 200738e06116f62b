// Package dashboard is the account owners' web page (issue 21): HTML, CSS and JavaScript
// embedded in the binary, served at "/" by the edge (edge/dashboard.go), talking only to
// /v1 of the same origin with the session cookie and X-CSRF-Token on writes.
//
// Assets are served under /assets/<name>.<hash>.<ext>, the hash being the first 12 hex
// characters of the content's SHA-256, with a year's immutable caching: a new release
// changes the names in the page, and the page itself is never cached (no-cache), so a
// release shows at once. The page carries a strict Content-Security-Policy: everything
// from this origin only, no inline script or style, no framing.
package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"path"
	"strings"

	"github.com/valyala/fasthttp"
)

//go:embed static
var static embed.FS

// CSP is the page's Content-Security-Policy. img-src admits data: for nothing but the
// favicon-less default; the QR codes and the chart are inline SVG built through the DOM.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; " +
	"form-action 'self'; frame-ancestors 'none'"

// Config is what the page needs from the deployment. It is put into the page as <meta>
// elements (no inline script).
type Config struct {
	Brand   string // shown in the header
	Network string // "mainnet" or "nile"; nile shows the testnet banner on every screen
	// ExplorerTxURL is a transaction's page on a block explorer, "{tx}" replaced by its id.
	ExplorerTxURL string
}

type asset struct {
	body        []byte
	contentType string
}

// Handler serves the page and its assets.
type Handler struct {
	index  []byte
	assets map[string]asset // "/assets/app.0123456789ab.js" -> content
}

// order of the scripts in the page: texts first (every other file reads them), the QR
// library before the app.
var scripts = []string{"texts.js", "vendor/qrcode.js", "app.js"}

// New builds the page for cfg.
func New(cfg Config) (*Handler, error) {
	if cfg.Network != "mainnet" && cfg.Network != "nile" {
		return nil, fmt.Errorf("dashboard: network %q", cfg.Network)
	}
	if cfg.ExplorerTxURL != "" && !strings.Contains(cfg.ExplorerTxURL, "{tx}") {
		return nil, errors.New("dashboard: ExplorerTxURL must contain {tx}")
	}
	h := &Handler{assets: map[string]asset{}}
	hashed := func(name string) (string, error) {
		b, err := fs.ReadFile(static, "static/"+name)
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(b)
		ext := path.Ext(name)
		url := "/assets/" + strings.TrimSuffix(path.Base(name), ext) + "." + hex.EncodeToString(sum[:6]) + ext
		h.assets[url] = asset{body: b, contentType: mime.TypeByExtension(ext)}
		return url, nil
	}
	css, err := hashed("app.css")
	if err != nil {
		return nil, err
	}
	var js []string
	for _, s := range scripts {
		u, err := hashed(s)
		if err != nil {
			return nil, err
		}
		js = append(js, u)
	}
	if _, err := hashed("vendor/qrcode-LICENSE.txt"); err != nil {
		return nil, err
	}
	tpl, err := template.ParseFS(static, "static/index.html")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := tpl.Execute(&buf, map[string]any{"CSS": css, "JS": js, "Cfg": cfg}); err != nil {
		return nil, err
	}
	h.index = buf.Bytes()
	return h, nil
}

// AssetPaths lists the asset URLs (tests).
func (h *Handler) AssetPaths() []string {
	out := make([]string, 0, len(h.assets))
	for k := range h.assets {
		out = append(out, k)
	}
	return out
}

// Serve answers GET and HEAD of "/" and of the assets; it reports false for any other
// path, which the caller answers as an unknown route.
func (h *Handler) Serve(rc *fasthttp.RequestCtx) bool {
	p := string(rc.Path())
	hd := &rc.Response.Header
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	if p == "/" {
		hd.Set("Content-Security-Policy", CSP)
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Cache-Control", "no-cache")
		hd.SetContentType("text/html; charset=utf-8")
		rc.SetStatusCode(fasthttp.StatusOK)
		rc.SetBody(h.index)
		return true
	}
	a, ok := h.assets[p]
	if !ok {
		return false
	}
	hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	hd.SetContentType(a.contentType)
	rc.SetStatusCode(fasthttp.StatusOK)
	rc.SetBody(a.body)
	return true
}
