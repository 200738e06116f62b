package health

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"rental/infra/tron"
)

// fakeNode serves the two java-tron endpoints NodeSupply uses, with java-tron's field
// names, on 127.0.0.1.
func fakeNode(t *testing.T, maxSize map[string]int64, limit, weight int64, down *atomic.Bool) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /wallet/getaccountresource", func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		json.NewEncoder(w).Encode(map[string]int64{"TotalEnergyLimit": limit, "TotalEnergyWeight": weight})
	})
	mux.HandleFunc("POST /wallet/getcandelegatedmaxsize", func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var req struct {
			OwnerAddress string `json:"owner_address"`
			Type         int    `json:"type"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Type != 1 {
			http.Error(w, `{"Error":"want type 1 (ENERGY)"}`, http.StatusOK)
			return
		}
		if n := maxSize[req.OwnerAddress]; n > 0 {
			json.NewEncoder(w).Encode(map[string]int64{"max_size": n})
			return
		}
		w.Write([]byte(`{}`)) // proto3: a zero max_size is omitted
	})
	srv := httptest.NewServer(mux) // listens on 127.0.0.1
	t.Cleanup(srv.Close)
	return srv
}

func addr(t *testing.T, s string) tron.Address {
	a, err := tron.ParseAddress(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestNodeSupplySumsPoolsInEnergy(t *testing.T) {
	poolA := "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"
	poolB := "TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf"
	var down atomic.Bool
	// 90 billion energy per day across 18 billion staked TRX: 5 energy per TRX.
	node := fakeNode(t, map[string]int64{poolA: 1_000 * tron.SunPerTRX, poolB: 2_500_500_000}, 90_000_000_000, 18_000_000_000, &down)
	client := tron.NewClient(node.URL)
	s := NewNodeSupply(client, []tron.Address{addr(t, poolA), addr(t, poolB)})

	got, err := s.AvailableEnergy(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// 1,000 TRX -> 5,000; 2,500.5 TRX -> 12,502 (rounded down per pool).
	if got != 5_000+12_502 {
		t.Fatalf("available energy %d, want %d", got, 17_502)
	}

	// A checker over it: operational with energy, down when the node is unreachable.
	c := NewChecker(Options{Database: fakeDB{}, Supply: s})
	if sup := c.supply(context.Background()); sup.Status != Operational || sup.AvailableEnergy != 17_502 {
		t.Fatalf("supply %+v", sup)
	}
	down.Store(true)
	if _, err := s.AvailableEnergy(context.Background()); !errors.Is(err, tron.ErrNodeUnavailable) {
		t.Fatalf("node down: err %v, want ErrNodeUnavailable", err)
	}
	if sup := c.supply(context.Background()); sup.Status != Down || sup.AvailableEnergy != 0 {
		t.Fatalf("node down: supply %+v", sup)
	}
}

func TestNodeSupplyEmptyPoolIsDegraded(t *testing.T) {
	var down atomic.Bool
	node := fakeNode(t, map[string]int64{}, 90_000_000_000, 18_000_000_000, &down)
	pool := addr(t, "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t")
	c := NewChecker(Options{Database: fakeDB{}, Supply: NewNodeSupply(tron.NewClient(node.URL), []tron.Address{pool})})
	if sup := c.supply(context.Background()); sup.Status != Degraded || sup.AvailableEnergy != 0 {
		t.Fatalf("supply %+v", sup)
	}
	// No pool configured at all reports the same.
	c = NewChecker(Options{Database: fakeDB{}, Supply: NewNodeSupply(tron.NewClient(node.URL), nil)})
	if sup := c.supply(context.Background()); sup.Status != Degraded {
		t.Fatalf("no pools: supply %+v", sup)
	}
}
