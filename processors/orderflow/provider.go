package orderflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/chainstore"
	"rental/infra/orderstore"
	"rental/infra/supply"
	"rental/infra/supplystore"
	"rental/schemas/orders"
	"rental/schemas/pricing"
)

// buyFromProvider delivers a provider fill: the provider delegates from its own stake and
// its answer becomes the fill, journaled under the provider's address so that settling,
// verification and the chain facts treat it like our own. The reference is the order and
// the fill, both committed before the first call, so asking again after a crash or a
// rolled-back step answers the same purchase and never buys twice. A provider that is sold
// out hands the fill to the next provider, if any; otherwise the part is not delivered.
func (f *Flow) buyFromProvider(ctx context.Context, tx pgx.Tx, o orderstore.Row, fl orderstore.Fill) error {
	next := -1
	var p Provider
	for i, q := range f.o.Providers {
		if q.Slug() == fl.Source {
			p, next = q, i+1
		}
	}
	if p == nil {
		return orderstore.SetFillState(ctx, tx, o.ID, fl.Seq, orderstore.FillFailed)
	}
	req := supply.ProviderOrderRequest{Ref: fmt.Sprintf("%s:%d", o.ID, fl.Seq), Resource: pricingResource(o.Resource), Tier: tierOf(o),
		Amount: fl.Amount, Receiver: o.Receiver}
	r, err := p.Order(ctx, req)
	if errors.Is(err, supply.ErrProviderSoldOut) {
		f.log.Info("provider sold out", "order", o.ID, "provider", p.Slug(), "amount", fl.Amount)
		if err := orderstore.SetFillState(ctx, tx, o.ID, fl.Seq, orderstore.FillFailed); err != nil {
			return err
		}
		// The pricer stops listing and committing its stock until it delivers again or the
		// refusal cool-down passes (infra/supplystore).
		if err := supplystore.RecordRefusal(ctx, tx, o.Network, p.Slug(), f.o.Now()); err != nil {
			return err
		}
		if next < len(f.o.Providers) {
			return orderstore.AppendProviderFill(ctx, tx, o.ID, f.o.Providers[next].Slug(), fl.Amount)
		}
		// The last provider is sold out: the deep reserve is the last source.
		seq, err := orderstore.NextFillSeq(ctx, tx, o.ID)
		if err != nil {
			return err
		}
		var w orderstore.Writes
		queued, err := f.queueDeepFill(ctx, tx, &w, o, seq, fl.Amount)
		if err != nil || !queued {
			return err
		}
		w.FilledBy(o.ID, orders.FilledByDeep)
		return w.Send(ctx, tx)
	}
	if err != nil {
		return fmt.Errorf("provider %s: %w", p.Slug(), err)
	}
	head, err := f.o.Node.GetHead(ctx)
	if err != nil {
		return err
	}
	if err := orderstore.FillBought(ctx, tx, o.ID, fl.Seq, orderstore.Bought{From: r.From, Amount: r.Amount, BalanceSun: r.BalanceSun,
		TxID: r.TxID}); err != nil {
		return err
	}
	// The provider's transaction expires like any other: a minute of chain time after it
	// was built, at the latest.
	exp := time.UnixMilli(head.BlockHeader.RawData.Timestamp + 60_000)
	if err := orderstore.InsertProviderDelegation(ctx, tx, r.TxID, o.ID, fl.Seq, r.From,
		map[string]any{"provider": p.Slug(), "ref": req.Ref}, exp); err != nil {
		return err
	}
	// A provider's part cannot be taken back by us: the order names the provider (reclaim
	// answers 3008).
	if err := orderstore.SetFilledBy(ctx, tx, o.ID, p.Slug()); err != nil {
		return err
	}
	if err := supplystore.ClearRefusal(ctx, tx, o.Network, p.Slug()); err != nil {
		return err
	}
	return chainstore.Track(ctx, tx, r.TxID)
}

func pricingResource(r orders.Resource) pricing.Resource { return pricing.Resource(r) }

func tierOf(o orderstore.Row) pricing.Tier {
	if o.Tier == nil {
		return ""
	}
	return pricing.Tier(*o.Tier)
}
