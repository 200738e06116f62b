package tronsim

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"rental/infra/tron"
	"rental/schemas/network"
)

// harness is a simulator behind a real HTTP server on 127.0.0.1.
type harness struct {
	t   *testing.T
	sim *Sim
	url string
}

var testGenesis = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	if opts.GenesisTime.IsZero() {
		opts.GenesisTime = testGenesis
	}
	sim, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		srv.Close()
		sim.Close()
	})
	return &harness{t: t, sim: sim, url: srv.URL}
}

// do sends a JSON request and decodes the JSON answer into out; it returns the status.
func (h *harness) do(method, path string, in, out any) int {
	h.t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			h.t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, h.url+path, body)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, out); err != nil {
			h.t.Fatalf("%s %s: decode %q: %v", method, path, raw, err)
		}
	}
	return resp.StatusCode
}

// wallet POSTs to a java-tron endpoint, requires 200 and no {"Error"} answer.
func (h *harness) wallet(path string, in, out any) {
	h.t.Helper()
	var raw json.RawMessage
	if st := h.do(http.MethodPost, path, in, &raw); st != http.StatusOK {
		h.t.Fatalf("POST %s: status %d", path, st)
	}
	var e struct{ Error string }
	_ = json.Unmarshal(raw, &e)
	if e.Error != "" {
		h.t.Fatalf("POST %s: node error %s", path, e.Error)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			h.t.Fatalf("POST %s: decode %s: %v", path, raw, err)
		}
	}
}

// walletError POSTs and returns the {"Error": ...} text (failing when there is none).
func (h *harness) walletError(path string, in any) string {
	h.t.Helper()
	var e struct{ Error string }
	if st := h.do(http.MethodPost, path, in, &e); st != http.StatusOK {
		h.t.Fatalf("POST %s: status %d", path, st)
	}
	if e.Error == "" {
		h.t.Fatalf("POST %s: want an Error answer", path)
	}
	return e.Error
}

func (h *harness) ctl(path string, in, out any) {
	h.t.Helper()
	if st := h.do(http.MethodPost, path, in, out); st != http.StatusOK {
		h.t.Fatalf("POST %s: status %d", path, st)
	}
}

func (h *harness) mine(n int) int64 {
	h.t.Helper()
	var out struct{ Head int64 }
	h.ctl("/sim/blocks", map[string]int{"count": n}, &out)
	return out.Head
}

func (h *harness) head() Head {
	h.t.Helper()
	var out Head
	if st := h.do(http.MethodGet, "/sim/head", nil, &out); st != http.StatusOK {
		h.t.Fatalf("GET /sim/head: %d", st)
	}
	return out
}

func (h *harness) account(a tron.Address) AccountView {
	h.t.Helper()
	var v AccountView
	if st := h.do(http.MethodGet, "/sim/accounts/"+a.String(), nil, &v); st != http.StatusOK {
		h.t.Fatalf("GET /sim/accounts: %d", st)
	}
	return v
}

func (h *harness) seed(g GenesisAccount) {
	h.t.Helper()
	h.ctl("/sim/accounts", g, nil)
}

func (h *harness) info(txid string) tron.TransactionInfo {
	h.t.Helper()
	var ti tron.TransactionInfo
	h.wallet("/wallet/gettransactioninfobyid", tron.ValueRequest{Value: txid}, &ti)
	return ti
}

func (h *harness) broadcast(tx *tron.Transaction) broadcastReply {
	h.t.Helper()
	var r broadcastReply
	h.wallet("/wallet/broadcasttransaction", tx, &r)
	return r
}

// signed builds a transaction through a create endpoint and signs it with key.
func (h *harness) signed(path string, req any, key tron.PrivateKey) *tron.Transaction {
	h.t.Helper()
	var tx tron.Transaction
	h.wallet(path, req, &tx)
	if err := tron.SignTransaction(&tx, key); err != nil {
		h.t.Fatalf("sign %s: %v", path, err)
	}
	return &tx
}

func newKey(t *testing.T) tron.PrivateKey {
	t.Helper()
	k, err := tron.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func hexText(s string) string {
	b, err := hex.DecodeString(s)
	if err != nil {
		return s
	}
	return string(b)
}

func wantContains(t *testing.T, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Fatalf("got %q, want it to contain %q", got, want)
	}
}

func nileOpts() Options { return Options{Network: network.Nile} }

const trx = 1_000_000
