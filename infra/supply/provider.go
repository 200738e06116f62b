package supply

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"rental/schemas/pricing"
)

// Provider is an external energy/bandwidth seller (the wholesale market). Adapters for real
// providers implement it; HTTPProvider speaks the simple offers API that ProviderServer
// simulates.
type Provider interface {
	// Slug names the provider (its offers' Source).
	Slug() string
	// ListOffers returns what the provider sells now, as market-class offers at the
	// provider's price (cost to the platform) per unit for the whole rental.
	ListOffers(ctx context.Context) ([]pricing.Offer, error)
}

// OffersResponse is the body of GET {base}/v1/offers of the provider offers API.
type OffersResponse struct {
	Provider string      `json:"provider"`
	Offers   []WireOffer `json:"offers"`
}

// WireOffer is one offer on the provider offers API: price_sun is per unit for the whole
// rental, a number with at most two decimals.
type WireOffer struct {
	Resource pricing.Resource `json:"resource"`
	Tier     pricing.Tier     `json:"tier"`
	PriceSun pricing.Centisun `json:"price_sun"`
	Amount   int64            `json:"amount"`
}

// HTTPProvider reads a provider's offers over HTTP.
type HTTPProvider struct {
	slug string
	base string
	http *http.Client
}

// NewHTTPProvider returns an adapter for the provider at baseURL (e.g.
// http://127.0.0.1:8091). A nil client means one with a 2 s timeout: a slow provider must not
// hold up a pricing cycle.
func NewHTTPProvider(slug, baseURL string, c *http.Client) *HTTPProvider {
	if c == nil {
		c = &http.Client{Timeout: 2 * time.Second}
	}
	return &HTTPProvider{slug: slug, base: strings.TrimRight(baseURL, "/"), http: c}
}

func (p *HTTPProvider) Slug() string { return p.slug }

// ListOffers fetches and checks the offers. An offer with an unknown resource or tier, or a
// non-positive price or amount, fails the whole answer: a provider sending garbage is treated
// as unavailable rather than half-trusted.
func (p *HTTPProvider) ListOffers(ctx context.Context) ([]pricing.Offer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/v1/offers", nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("supply: provider %s: %w", p.slug, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("supply: provider %s: %w", p.slug, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("supply: provider %s: HTTP %d", p.slug, resp.StatusCode)
	}
	var r OffersResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("supply: provider %s: %w", p.slug, err)
	}
	out := make([]pricing.Offer, 0, len(r.Offers))
	for _, o := range r.Offers {
		if err := o.check(); err != nil {
			return nil, fmt.Errorf("supply: provider %s: %w", p.slug, err)
		}
		out = append(out, pricing.Offer{Class: pricing.ClassMarket, Source: p.slug, Resource: o.Resource, Tier: o.Tier, Cost: o.PriceSun, Amount: o.Amount})
	}
	return out, nil
}

func (o WireOffer) check() error {
	if o.Resource != pricing.Energy && o.Resource != pricing.Bandwidth {
		return fmt.Errorf("offer resource %q", o.Resource)
	}
	if pricing.TierSeconds(o.Tier) == 0 {
		return fmt.Errorf("offer tier %q", o.Tier)
	}
	if o.PriceSun <= 0 || o.Amount <= 0 {
		return fmt.Errorf("offer %s %s: price and amount must be positive", o.Resource, o.Tier)
	}
	return nil
}

// The provider order API: POST {base}/v1/orders with ProviderOrderRequest. The provider
// delegates from its own stake to the receiver and answers ProviderOrderResult. ref is the
// platform's idempotency key: the same ref always answers the same delegation, so a
// platform that crashed after asking asks again and never buys twice.

// ProviderOrderRequest asks a provider to deliver.
type ProviderOrderRequest struct {
	Ref      string           `json:"ref"`
	Resource pricing.Resource `json:"resource"`
	Tier     pricing.Tier     `json:"tier"`
	Amount   int64            `json:"amount"`
	Receiver string           `json:"receiver"`
}

// ProviderOrderResult is a provider's delivery: the delegation transaction, the address it
// delegates from and the staked balance it delegated.
type ProviderOrderResult struct {
	Ref        string `json:"ref"`
	TxID       string `json:"txid"`
	From       string `json:"from"`
	Amount     int64  `json:"amount"`
	BalanceSun int64  `json:"balance_sun"`
}

// ErrProviderSoldOut is a provider that cannot deliver the amount now (HTTP 409).
var ErrProviderSoldOut = errors.New("supply: provider sold out")

// Order asks the provider to deliver req. ErrProviderSoldOut when it has too little stock;
// any other error leaves the outcome unknown, and the caller asks again with the same ref.
func (p *HTTPProvider) Order(ctx context.Context, req ProviderOrderRequest) (ProviderOrderResult, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return ProviderOrderResult{}, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base+"/v1/orders", bytes.NewReader(body))
	if err != nil {
		return ProviderOrderResult{}, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := p.http.Do(hr)
	if err != nil {
		return ProviderOrderResult{}, fmt.Errorf("supply: provider %s order: %w", p.slug, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return ProviderOrderResult{}, fmt.Errorf("supply: provider %s order: %w", p.slug, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusConflict:
		return ProviderOrderResult{}, fmt.Errorf("%w: %s", ErrProviderSoldOut, p.slug)
	default:
		return ProviderOrderResult{}, fmt.Errorf("supply: provider %s order: HTTP %d", p.slug, resp.StatusCode)
	}
	var r ProviderOrderResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return ProviderOrderResult{}, fmt.Errorf("supply: provider %s order: %w", p.slug, err)
	}
	if r.Ref != req.Ref || r.TxID == "" || r.Amount <= 0 || r.Amount > req.Amount {
		return ProviderOrderResult{}, fmt.Errorf("supply: provider %s answered an order that is not the one asked", p.slug)
	}
	return r, nil
}
