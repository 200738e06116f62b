package acceptance

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/orderstore"
	"rental/infra/quotes"
	"rental/infra/tron"
	"rental/schemas/apierr"
	"rental/schemas/pricing"
)

// ---- the receiver: not ours ----

// The own-address rule (3003): configured pools and treasury (OwnAddresses), stake pools
// known to the database, and every deposit address, retired ones included (a delegation to
// any of them would be resource the service gives itself). One statement answers it for
// the one-by-one path, the group commit and batch creation (orderstore.QueueOwnAddresses).

// queueOurs queues the own-address check of addrs in b, setting the transaction's lock
// wait to wait (nil: unchanged); the function it returns tells, once b ran, whether an
// address is the service's own.
func (m *Orders) queueOurs(b *pgx.Batch, addrs []string, wait *time.Duration) func(string) bool {
	found := orderstore.QueueOwnAddresses(b, addrs, wait)
	return func(a string) bool { return m.own[a] || found.Has(a) }
}

// queueReceiverCheck queues the own-address check of one receiver in b; the function it
// returns gives the answer (3003 or nil) once b ran.
//
// Its statement also sets the transaction's lock_timeout to LockWait: the account's row
// (ledger hold) and a receiver's ceiling lock come after it and are the only waits left;
// a wait beyond LockWait is answered 4004 and the client retries at once.
func (m *Orders) queueReceiverCheck(b *pgx.Batch, a tron.Address) func() error {
	ours := m.queueOurs(b, []string{a.String()}, &m.o.LockWait)
	return func() error {
		if ours(a.String()) {
			return apierr.ReceiverIsOurs.New("the receiver is an address of this service").WithField("receiver")
		}
		return nil
	}
}

// checkReceiverNotOurs is queueReceiverCheck run at once in tx.
func (m *Orders) checkReceiverNotOurs(ctx context.Context, tx pgx.Tx, a tron.Address) error {
	b := &pgx.Batch{}
	result := m.queueReceiverCheck(b, a)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	return result()
}

// FirstOurs runs the own-address check for several receivers (a batch's) in tx, leaving
// its lock wait as it is: the index of the first that is the service's own, or -1.
func (m *Orders) FirstOurs(ctx context.Context, tx pgx.Tx, addrs []string) (int, error) {
	b := &pgx.Batch{}
	ours := m.queueOurs(b, addrs, nil)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return -1, err
	}
	for i, a := range addrs {
		if ours(a) {
			return i, nil
		}
	}
	return -1, nil
}

// ---- the receiver: the energy ceiling ----

// checkReceiverCeiling refuses an energy order that would take the receiver's live energy
// from this service above ReceiverMaxEnergy (5005). A transaction-scoped advisory lock on
// the receiver makes the sum exact under concurrent orders of any account; it is taken
// before the account's ledger row, always in that order, so the two cannot deadlock.
func (m *Orders) checkReceiverCeiling(ctx context.Context, tx pgx.Tx, receiver tron.Address, amount int64) error {
	r := receiver.String()
	if err := orderstore.LockReceiver(ctx, tx, r); err != nil {
		return err
	}
	live, err := orderstore.ReceiverLiveEnergy(ctx, tx, r, m.o.Now())
	if err != nil {
		return err
	}
	if live+amount > m.o.ReceiverMaxEnergy {
		return apierr.ReceiverCapacityExceeded.Newf("the receiver already holds %d energy from this service; at most %d more can be ordered", live, max(m.o.ReceiverMaxEnergy-live, 0)).
			WithField("receiver").With("max_additional", max(m.o.ReceiverMaxEnergy-live, 0))
	}
	return nil
}

// ---- quotes ----

// useQuote reads and locks the account's quote, refuses parameters contradicting it (2004,
// checked before expiry: a new quote would not fix them), an expired one (3005) and one
// another order used (3023: a quote prices one order; create records the use), and fills
// the parameters the request left out from it.
func (m *Orders) useQuote(ctx context.Context, tx pgx.Tx, accountID string, req *Request) (quotes.Quote, error) {
	q, err := quotes.GetForUseTx(ctx, tx, accountID, req.QuoteID)
	if errors.Is(err, quotes.ErrNotFound) {
		return q, invalid("quote_id", "not_found", "no quote "+quoted(req.QuoteID)+" on this account")
	}
	if err != nil {
		return q, err
	}
	var mismatched []string
	if req.Resource != "" && string(req.Resource) != q.Resource {
		mismatched = append(mismatched, "resource")
	}
	if q.Resource != string(pricing.Activation) && req.Resource != pricing.Activation {
		if req.Amount != 0 && req.Amount != q.Amount {
			mismatched = append(mismatched, "amount")
		}
		if req.Tier != "" && string(req.Tier) != q.Tier {
			mismatched = append(mismatched, "tier")
		}
	}
	if q.Receiver != "" && q.Receiver != req.Receiver.String() {
		mismatched = append(mismatched, "receiver")
	}
	if len(mismatched) > 0 {
		quote := map[string]any{"resource": q.Resource, "amount": q.Amount, "tier": nilIfEmpty(q.Tier), "receiver": nilIfEmpty(q.Receiver)}
		return q, apierr.QuoteMismatch.New("the order contradicts quote "+q.ID+" in "+strings.Join(mismatched, ", ")).
			WithField(mismatched[0]).With("quote_id", q.ID).With("mismatched", mismatched).With("quote", quote)
	}
	if !m.o.Prices.Now().Before(q.ExpiresAt) {
		return q, quotes.Expired(q)
	}
	if q.OrderID != "" {
		return q, quotes.Used(q)
	}
	req.Resource = pricing.Resource(q.Resource)
	if req.Resource != pricing.Activation {
		req.Amount, req.Tier = q.Amount, pricing.Tier(q.Tier)
	}
	return q, nil
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// ---- price, limits and supply ----

// price prices the order from the live snapshot (binding: an unknown activation state is
// 5003). With a quote the price is the quote's, but stock is still checked here: a quote
// locks the price, not the stock (5001). Supply errors are refined: 5007 when only spill
// beyond the own pools could fill and spill is forbidden, 5004 when the providers that
// should have covered the rest offer nothing at all.
func (m *Orders) price(ctx context.Context, req Request) (Priced, error) {
	amount := req.Amount
	if req.Resource == pricing.Activation {
		amount = 1
	}
	r := req.Receiver
	pr, err := m.o.Prices.Price(ctx, PriceRequest{Resource: req.Resource, Tier: req.Tier, Amount: amount, Receiver: &r, Activation: req.activation}, true)
	if req.Resource == pricing.Activation {
		return pr, err
	}
	e := apierr.As(err)
	switch {
	case err == nil:
	case e.Code == apierr.AmountOutOfRange:
		m.clampMaxAmount(e, req.Resource)
		return pr, e
	case e.Code == apierr.InsufficientSupply:
		if err := m.limitError(req.Resource, req.Tier, req.Amount); err != nil {
			return pr, err
		}
		return pr, m.supplyError(req, e)
	default:
		return pr, err
	}
	if err := m.limitError(req.Resource, req.Tier, req.Amount); err != nil {
		return pr, err
	}
	if m.o.ForbidProviderSpill {
		for _, f := range pr.Quote.Walk.Fills {
			if f.Class != pricing.ClassInstant {
				return pr, m.supplyError(req, nil)
			}
		}
	}
	return pr, nil
}

// clampMaxAmount lowers a 2008's max_amount to the account limit max_order_energy.
func (m *Orders) clampMaxAmount(e *apierr.Error, res pricing.Resource) {
	if mx, ok := e.Details["max_amount"].(int64); ok && res == pricing.Energy && mx > m.o.MaxOrderEnergy {
		e.With("max_amount", m.o.MaxOrderEnergy)
	}
}

// limitError is 2008 for an energy order above the account limit max_order_energy.
func (m *Orders) limitError(res pricing.Resource, tier pricing.Tier, amount int64) error {
	if res != pricing.Energy || amount <= m.o.MaxOrderEnergy {
		return nil
	}
	s, err := m.o.Prices.Snapshot()
	if err != nil {
		return err
	}
	rule := s.Rules[pricing.BookKey{Resource: res, Tier: tier}]
	return apierr.AmountOutOfRange.Newf("amount %d is above this account's max_order_energy %d", amount, m.o.MaxOrderEnergy).
		WithField("amount").With("min_amount", rule.MinAmount).With("max_amount", min(rule.MaxAmount, m.o.MaxOrderEnergy)).
		With("limit", "max_order_energy")
}

// supplyError says why the book cannot fill the order. short is the snapshot's 5001 (nil
// when the book could fill it only by spilling beyond the own pools).
func (m *Orders) supplyError(req Request, short *apierr.Error) error {
	s, err := m.o.Prices.Snapshot()
	if err != nil {
		return err
	}
	var own, market int64
	for _, l := range s.Books[pricing.BookKey{Resource: req.Resource, Tier: req.Tier}].Levels {
		switch l.Class {
		case pricing.ClassInstant:
			own += l.Amount
		case pricing.ClassMarket:
			market += l.Amount
		}
	}
	switch {
	case m.o.ForbidProviderSpill:
		return apierr.CapacityUnavailable.Newf("own capacity of %d units cannot fill %d, and this deployment does not fill orders from providers; nothing was charged", own, req.Amount).
			With("available", own)
	case m.o.MarketProviders > 0 && market == 0 && own < req.Amount:
		return apierr.ProviderUnavailable.New("own stock is short and no market provider is answering; nothing was charged").
			With("available", own)
	case short != nil:
		return short
	}
	return apierr.InsufficientSupply.New("not enough supply; nothing was charged")
}

// CheckRows applies the price table's rules to the amounts of one row, as acceptance
// does when the orders are placed: the row is on sale (2003 with available_tiers, 5006
// while paused) and each amount within the row's range and the account's max_order_energy
// (2008, max_amount lowered to that limit). Stock (5001) is not checked: it depends on the
// moment of placement. index is the amount refused, or -1 when the snapshot itself is
// unavailable (err is then its 5003) or nothing was refused.
func (m *Orders) CheckRows(res pricing.Resource, tier pricing.Tier, amounts []int64) (index int, err *apierr.Error) {
	s, serr := m.o.Prices.Snapshot()
	if serr != nil {
		return -1, apierr.As(serr)
	}
	for i, amount := range amounts {
		_, perr := s.Price(res, tier, amount)
		if perr == nil || errors.Is(perr, apierr.InsufficientSupply) {
			perr = m.limitError(res, tier, amount)
		}
		if perr == nil {
			continue
		}
		e := apierr.As(perr)
		if e.Code == apierr.AmountOutOfRange {
			m.clampMaxAmount(e, res)
		}
		return i, e
	}
	return -1, nil
}
