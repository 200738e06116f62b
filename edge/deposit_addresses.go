package edge

// GET /v1/deposit-addresses (API key, deposits.read): the account's DepositAddress rows
// (issuing the address on first read), its retired addresses newest first, and the rotation
// policy. Only support rotates an address (infra/cmd/admin rotate-address).

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/valyala/fasthttp"

	"rental/infra/deposits"
	"rental/schemas/events"
	"rental/schemas/ledger"
)

// DepositAddressesOptions are the module's dependencies.
type DepositAddressesOptions struct {
	Store  *deposits.Store         // required
	Rates  deposits.RateSource     // rate_now of the USDT row; nil = always null
	Policy deposits.RotationPolicy // published as `rotation`
	Logger *slog.Logger
}

// DepositAddresses is the module serving GET /v1/deposit-addresses.
type DepositAddresses struct {
	o DepositAddressesOptions
}

// NewDepositAddresses checks the options. Wrap Rates in a deposits.CachedRate to get the
// spec's 60 s cache.
func NewDepositAddresses(o DepositAddressesOptions) (*DepositAddresses, error) {
	if o.Store == nil {
		return nil, errors.New("edge: deposit addresses: Store is required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Policy == (deposits.RotationPolicy{}) {
		o.Policy = deposits.DefaultRotationPolicy()
	}
	return &DepositAddresses{o: o}, nil
}

// Handlers implements Module.
func (m *DepositAddresses) Handlers() map[string]HandlerFunc {
	return map[string]HandlerFunc{"GET /v1/deposit-addresses": m.get}
}

type rateNowJSON struct {
	TRXPerUSDT string      `json:"trx_per_usdt"`
	Source     string      `json:"source"`
	At         events.Time `json:"at"`
}

type retiredJSON struct {
	Address       string      `json:"address"`
	RetiredAt     events.Time `json:"retired_at"`
	CreditedUntil events.Time `json:"credited_until"`
}

type depositAddressesResponse struct {
	Data     []depositAddressJSON    `json:"data"`
	Retired  []retiredJSON           `json:"retired"`
	Rotation deposits.RotationPolicy `json:"rotation"`
}

func (m *DepositAddresses) get(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p := PrincipalFrom(rc)
	if p == nil || p.AccountID == "" {
		return errNoAccount()
	}
	rows, err := m.o.Store.List(ctx, p.AccountID, "")
	if err != nil {
		return err
	}
	out := depositAddressesResponse{Data: RenderDepositAddresses(rows), Retired: []retiredJSON{}, Rotation: m.o.Policy}
	if rate := m.rateNow(ctx); rate != nil {
		for i := range out.Data {
			if out.Data[i].Currency == string(deposits.USDT) {
				out.Data[i].RateNow = rate
			}
		}
	}
	retired, err := m.o.Store.Retired(ctx, p.AccountID)
	if err != nil {
		return err
	}
	for _, r := range retired {
		out.Retired = append(out.Retired, retiredJSON{Address: r.Address.String(), RetiredAt: events.Time(r.RetiredAt), CreditedUntil: events.Time(r.CreditedUntil)})
	}
	return WriteJSON(rc, fasthttp.StatusOK, out)
}

// rateNow is the USDT row's rate_now, or nil (JSON null) when there is no rate. A failing
// rate source does not fail the read: the rate is indicative and deposits are accepted
// without one.
func (m *DepositAddresses) rateNow(ctx context.Context) *rateNowJSON {
	if m.o.Rates == nil {
		return nil
	}
	r, ok, err := m.o.Rates.Rate(ctx)
	if err != nil {
		m.o.Logger.Warn("USDT rate unavailable", "err", err)
		return nil
	}
	if !ok {
		return nil
	}
	// A swap-pool rate's source carries the block it was read at (sunswap_v3@<block>, as a
	// credit's rate_source shows it); rate_now names the source alone, and `at` is that
	// block's time.
	source, _, _ := strings.Cut(r.Source, "@")
	return &rateNowJSON{TRXPerUSDT: ledger.FormatTRX(r.SunPerUSDT), Source: source, At: events.Time(r.At)}
}
