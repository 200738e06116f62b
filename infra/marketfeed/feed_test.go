package marketfeed

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestPricesReadsAPeersPriceTable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/prices" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"network":"nile","available_energy":777,"items":[
			{"resource":"energy","tier":"5m","price_sun_per_unit":40,"available":true},
			{"resource":"energy","tier":"1h","price_sun_per_unit":61,"available":true},
			{"resource":"energy","tier":"1d","price_sun_per_unit":90,"available":false},
			{"resource":"bandwidth","tier":"1h","price_sun_per_unit":800,"available":true}]}`))
	}))
	defer srv.Close()
	q, err := NewPrices("peer", srv.URL).Quote(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if q.PriceSun1h == nil || *q.PriceSun1h != 6100 || q.PriceSun1d != nil || *q.AvailableEnergy != 777 {
		t.Fatalf("quote %+v", q)
	}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) }))
	defer down.Close()
	if _, err := NewPrices("peer", down.URL).Quote(context.Background()); err == nil {
		t.Fatal("a 503 is no sample")
	}
}
