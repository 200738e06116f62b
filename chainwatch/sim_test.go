package chainwatch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"rental/infra/tron"
	"rental/infra/tronsim"
)

// simNode is the project's node simulator served over HTTP on 127.0.0.1, driven only
// through its HTTP control API (/sim/...) and read through the real java-tron client.
type simNode struct {
	t      testing.TB
	url    string
	client *tron.Client
	usdt   tron.Address
}

func startSim(t testing.TB) *simNode {
	t.Helper()
	sim, err := tronsim.New(tronsim.Options{Network: testNet})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = sim.Close()
	})
	return &simNode{t: t, url: srv.URL, client: tron.NewClient(srv.URL), usdt: sim.USDTContract()}
}

func (s *simNode) source() *NodeSource { return NewNodeSource(s.client, 4) }

// control POSTs body to a /sim/ endpoint and decodes the answer into out.
func (s *simNode) control(path string, body, out any) {
	s.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		s.t.Fatal(err)
	}
	resp, err := http.Post(s.url+path, "application/json", bytes.NewReader(b))
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e map[string]string
		_ = json.NewDecoder(resp.Body).Decode(&e)
		s.t.Fatalf("POST %s: HTTP %d %v", path, resp.StatusCode, e)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			s.t.Fatal(err)
		}
	}
}

func (s *simNode) trx(to tron.Address, sun int64) string {
	var r struct{ TxID string }
	s.control("/sim/trx/transfer", map[string]any{"to": to.String(), "amount_sun": sun}, &r)
	return r.TxID
}

func (s *simNode) usdtTransfer(to tron.Address, amount int64) string {
	var r struct{ TxID string }
	s.control("/sim/usdt/transfer", map[string]any{"to": to.String(), "amount": amount}, &r)
	return r.TxID
}

func (s *simNode) mine(count int) int64 {
	var r struct{ Head int64 }
	for count > 0 {
		n := min(count, 100_000)
		s.control("/sim/blocks", map[string]int{"count": n}, &r)
		count -= n
	}
	return r.Head
}

func (s *simNode) fork(depth int) tronsim.ForkResult {
	var r tronsim.ForkResult
	s.control("/sim/fork", map[string]int{"depth": depth}, &r)
	return r
}

func (s *simNode) head() int64 {
	h, err := s.source().Head(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	return h
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, within time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func fmtRate(blocks int64, d time.Duration) string {
	return fmt.Sprintf("%.0f blocks/s", float64(blocks)/d.Seconds())
}
