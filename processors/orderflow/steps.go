package orderflow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/chainwatch"
	"rental/infra/orderstore"
	"rental/infra/supply"
	"rental/infra/tron"
	"rental/schemas/apierr"
	"rental/schemas/orders"
	"rental/schemas/pricing"
)

// Fill sources besides the providers' slugs.
const (
	sourcePool = "pool" // one of our stake pools delegates
	sourceDeep = "deep" // rented from the deep reserve contract (Pool is the contract)
)

// fill is one part of an order: who delivers how much.
type fill struct {
	Seq        int
	Source     string       // sourcePool, sourceDeep or a provider's slug
	Pool       tron.Address // the address delegating: our pool or the provider's
	Amount     int64        // resource units
	BalanceSun int64        // staked TRX delegated for them
	State      string
}

const fillsSQL = `SELECT seq, source, pool_address, amount, balance_sun, state FROM order_fills WHERE order_id = $1 ORDER BY seq`

func fills(ctx context.Context, tx pgx.Tx, orderID string) ([]fill, error) {
	rows, err := tx.Query(ctx, fillsSQL, orderID)
	if err != nil {
		return nil, err
	}
	return scanFills(rows)
}

func scanFills(rows pgx.Rows) ([]fill, error) {
	defer rows.Close()
	var out []fill
	for rows.Next() {
		var fl fill
		var pool *string // null for a provider fill not bought yet
		if err := rows.Scan(&fl.Seq, &fl.Source, &pool, &fl.Amount, &fl.BalanceSun, &fl.State); err != nil {
			return nil, err
		}
		if pool != nil {
			a, err := tron.ParseAddress(*pool)
			if err != nil {
				return nil, err
			}
			fl.Pool = a
		}
		out = append(out, fl)
	}
	return out, rows.Err()
}

func resourceCode(r orders.Resource) tron.ResourceCode {
	if r == orders.Bandwidth {
		return tron.Bandwidth
	}
	return tron.Energy
}

// perUnit returns the network's conversion for the resource: units = balanceSun × limit /
// (weight × 1 TRX).
func perUnit(res *tron.AccountResource, r orders.Resource) (limit, weight int64) {
	if r == orders.Bandwidth {
		return res.TotalNetLimit, res.TotalNetWeight
	}
	return res.TotalEnergyLimit, res.TotalEnergyWeight
}

// allocate reserves stake for the order from the own pools, cheapest source first, under
// the pool rows' locks: what a pool can delegate is the chain's figure minus the fills
// reserved or broadcast but not yet seen landed, so two replicas never sell the same stake.
// A shortfall is delivered partially (partial flag and pro-rata refund at confirmation);
// no stock at all fails the order with 5001, charge reversed.
func (f *Flow) allocate(ctx context.Context, tx pgx.Tx, o orderstore.Row) (bool, action, error) {
	now := f.o.Now()
	if o.Resource == orders.Activation {
		return true, nil, f.setStatus(ctx, tx, o, orders.Allocating, now.Add(30*time.Second))
	}
	// Everything written here goes in one round trip once the amounts are known: the pools'
	// row locks (taken in allocatePools) are held from then to commit, and every round trip
	// under them is time no other order of any replica can be allocated.
	b := &pgx.Batch{}
	remaining := o.Amount
	seq := 0
	if o.Network.SellsOwnStake() && len(f.o.Pools) > 0 {
		var err error
		if seq, remaining, err = f.allocatePools(ctx, tx, o, b); err != nil {
			return false, nil, err
		}
	}
	if remaining > 0 && len(f.o.Providers) > 0 {
		// The rest is bought from the first provider when the order is delivered; the
		// fill row is written now, so the purchase has a stable reference (order and fill)
		// that a crash or a retry can never change.
		b.Queue(`INSERT INTO order_fills (order_id, seq, source, amount, balance_sun, state)
			VALUES ($1, $2, $3, $4, 0, 'reserved')`, o.ID, seq, f.o.Providers[0].Slug(), remaining)
		seq++
	}
	filledBy := orders.FilledByPool
	if remaining > 0 && len(f.o.Providers) == 0 {
		// Without providers the deep reserve is next (with providers, it takes what the
		// last of them cannot deliver: buyFromProvider).
		queued, err := f.queueDeepFill(ctx, tx, b, o, seq, remaining)
		if err != nil {
			return false, nil, err
		}
		if queued {
			seq++
			filledBy = orders.FilledByDeep
		}
	}
	if seq == 0 {
		return true, nil, f.fail(ctx, tx, o, apierr.InsufficientSupply, "neither the stake pools nor the providers could fill the order when it was allocated")
	}
	b.Queue(`UPDATE orders SET filled_by = $2, status = 'allocating', next_due_at = $3, updated_at = now() WHERE id = $1`,
		o.ID, filledBy, now.Add(30*time.Second))
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return false, nil, err
	}
	f.transitions.WithLabelValues(string(orders.Allocating)).Inc()
	return true, nil, nil
}

// queueDeepFill queues a fill of up to amount energy from the deep reserve as fill seq,
// and reports whether it did: only for energy, on a network selling own stake, with the
// contract configured and energy left in it beyond the deep fills still in flight. A
// contract that cannot be read is treated as empty (the part goes undelivered and is
// refunded), not as an error that would hold the order up. Two processors renting the
// last energy at once are possible (fills are not locked against each other outside the
// allocation); the rent that loses reverts, and its fill fails like any refused delegation.
func (f *Flow) queueDeepFill(ctx context.Context, q pgx.Tx, b *pgx.Batch, o orderstore.Row, seq int, amount int64) (bool, error) {
	if f.o.Deep == nil || o.Resource != orders.Energy || !o.Network.SellsOwnStake() || len(f.o.Pools) == 0 || o.DurationSeconds == nil {
		return false, nil
	}
	avail, err := f.o.Deep.Available(ctx)
	if err != nil {
		f.log.Warn("deep reserve unreadable; the order's rest is not delivered", "order", o.ID, "err", err)
		return false, nil
	}
	var inflight int64
	if err := q.QueryRow(ctx, `SELECT coalesce(sum(amount), 0) FROM order_fills WHERE source = $1 AND state IN ('reserved', 'broadcast')`,
		sourceDeep).Scan(&inflight); err != nil {
		return false, err
	}
	take := min(amount, avail-inflight)
	if take <= 0 {
		return false, nil
	}
	res, err := f.chain.weights(ctx, f.o.Node, f.o.Pools[0].Address(), f.o.Now())
	if err != nil {
		return false, fmt.Errorf("read network weights: %w", err)
	}
	limit, weight := perUnit(res, o.Resource)
	balance, err := tron.BalanceForEnergy(take, limit, weight)
	if err != nil {
		return false, err
	}
	// What the contract is expected to delegate (it rounds up to whole TRX at its block's
	// weights; verification allows the drift margin).
	balance = (balance + tron.SunPerTRX - 1) / tron.SunPerTRX * tron.SunPerTRX
	b.Queue(`INSERT INTO order_fills (order_id, seq, source, pool_address, amount, balance_sun, state)
		VALUES ($1, $2, $3, $4, $5, $6, 'reserved')`, o.ID, seq, sourceDeep, f.o.Deep.Contract().String(), take, balance)
	return true, nil
}

// buyFromProvider delivers a provider fill: the provider delegates from its own stake and
// its answer becomes the fill, journaled under the provider's address so that settling,
// verification and the chain facts treat it like our own. The reference is the order and
// the fill, both committed before the first call, so asking again after a crash or a
// rolled-back step answers the same purchase and never buys twice. A provider that is sold
// out hands the fill to the next provider, if any; otherwise the part is not delivered.
func (f *Flow) buyFromProvider(ctx context.Context, tx pgx.Tx, o orderstore.Row, fl fill) error {
	next := -1
	var p Provider
	for i, q := range f.o.Providers {
		if q.Slug() == fl.Source {
			p, next = q, i+1
		}
	}
	if p == nil {
		_, err := tx.Exec(ctx, `UPDATE order_fills SET state = 'failed', updated_at = now() WHERE order_id = $1 AND seq = $2`, o.ID, fl.Seq)
		return err
	}
	req := supply.ProviderOrderRequest{Ref: fmt.Sprintf("%s:%d", o.ID, fl.Seq), Resource: pricingResource(o.Resource), Tier: tierOf(o),
		Amount: fl.Amount, Receiver: o.Receiver}
	r, err := p.Order(ctx, req)
	if errors.Is(err, supply.ErrProviderSoldOut) {
		f.log.Info("provider sold out", "order", o.ID, "provider", p.Slug(), "amount", fl.Amount)
		if _, err := tx.Exec(ctx, `UPDATE order_fills SET state = 'failed', updated_at = now() WHERE order_id = $1 AND seq = $2`, o.ID, fl.Seq); err != nil {
			return err
		}
		if next < len(f.o.Providers) {
			_, err := tx.Exec(ctx, `INSERT INTO order_fills (order_id, seq, source, amount, balance_sun, state)
				SELECT $1, max(seq) + 1, $2, $3, 0, 'reserved' FROM order_fills WHERE order_id = $1`, o.ID, f.o.Providers[next].Slug(), fl.Amount)
			return err
		}
		// The last provider is sold out: the deep reserve is the last source.
		var seq int
		if err := tx.QueryRow(ctx, `SELECT max(seq) + 1 FROM order_fills WHERE order_id = $1`, o.ID).Scan(&seq); err != nil {
			return err
		}
		b := &pgx.Batch{}
		queued, err := f.queueDeepFill(ctx, tx, b, o, seq, fl.Amount)
		if err != nil || !queued {
			return err
		}
		b.Queue(`UPDATE orders SET filled_by = $2 WHERE id = $1 AND (filled_by IS NULL OR filled_by = $3)`,
			o.ID, orders.FilledByDeep, orders.FilledByPool)
		return tx.SendBatch(ctx, b).Close()
	}
	if err != nil {
		return fmt.Errorf("provider %s: %w", p.Slug(), err)
	}
	head, err := f.o.Node.GetNowBlock(ctx)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE order_fills SET pool_address = $3, amount = $4, balance_sun = $5, delegate_txid = $6, state = 'broadcast',
			updated_at = now() WHERE order_id = $1 AND seq = $2`, o.ID, fl.Seq, r.From, r.Amount, r.BalanceSun, r.TxID); err != nil {
		return err
	}
	// The provider's transaction expires like any other: a minute of chain time after it
	// was built, at the latest.
	exp := time.UnixMilli(head.BlockHeader.RawData.Timestamp + 60_000)
	if _, err := tx.Exec(ctx, `INSERT INTO signed_txs (txid, order_id, purpose, fill_seq, attempt, signer, tx, expiration, state)
		VALUES ($1, $2, 'delegate', $3, 0, $4, $5, $6, 'broadcast') ON CONFLICT (txid) DO NOTHING`,
		r.TxID, o.ID, fl.Seq, r.From, map[string]any{"provider": p.Slug(), "ref": req.Ref}, exp); err != nil {
		return err
	}
	// A provider's part cannot be taken back by us: the order names the provider (reclaim
	// answers 3008).
	if _, err := tx.Exec(ctx, `UPDATE orders SET filled_by = $2 WHERE id = $1 AND (filled_by IS NULL OR filled_by = $3)`,
		o.ID, p.Slug(), orders.FilledByPool); err != nil {
		return err
	}
	return chainwatch.Track(ctx, tx, r.TxID)
}

// allocatePools reserves stake from the own pools; it queues the fills in b and returns the
// next fill sequence number and what is left to allocate. It locks every pool row of the
// network (in address order, so replicas never deadlock) until the transaction ends.
func (f *Flow) allocatePools(ctx context.Context, tx pgx.Tx, o orderstore.Row, b *pgx.Batch) (int, int64, error) {
	// The chain's figures are read before the lock (they are cached, and a node call
	// under the lock would stall every allocation): a figure read earlier is still safe,
	// because every fill that landed after it was read counts as in flight below.
	type poolFigure struct {
		pool   tron.Address
		can    int64
		readAt time.Time
	}
	figures := map[string]poolFigure{}
	var addrs []string
	var after []time.Time
	for p := range f.byAddr {
		can, readAt, err := f.chain.delegatable(ctx, f.o.Node, p, resourceCode(o.Resource), f.o.Now())
		if err != nil {
			return 0, 0, fmt.Errorf("read pool %s: %w", p, err)
		}
		figures[p.String()] = poolFigure{p, can, readAt}
		addrs, after = append(addrs, p.String()), append(after, readAt.Add(-clockMargin))
	}
	if len(figures) == 0 {
		return 0, o.Amount, nil
	}
	res, err := f.chain.weights(ctx, f.o.Node, figures[addrs[0]].pool, f.o.Now())
	if err != nil {
		return 0, 0, fmt.Errorf("read network weights: %w", err)
	}
	limit, weight := perUnit(res, o.Resource)
	// In flight: fills not yet visible in the chain's figure. That is every fill reserved
	// or broadcast, and every fill that landed after the figure was read, with a margin
	// for the clocks of this process and the database. The sum is a statement of its own
	// after the lock, queued with it (one round trip): a statement sees what was committed
	// when it started, so it must start once the lock is held.
	inflight := map[string]int64{}
	var order []string // the network's pools in the database's address order: the draw order
	lock := &pgx.Batch{}
	lock.Queue(`SELECT address FROM stake_pools WHERE network = $1 ORDER BY address FOR UPDATE`, string(o.Network)).
		Query(func(rows pgx.Rows) error {
			var err error
			order, err = pgx.CollectRows(rows, pgx.RowTo[string])
			return err
		})
	lock.Queue(`SELECT p.address, coalesce((SELECT sum(balance_sun) FROM order_fills f WHERE f.pool_address = p.address
				AND f.source = 'pool' AND f.state IN ('reserved', 'broadcast')), 0)
			+ coalesce((SELECT sum(balance_sun) FROM order_fills f WHERE f.pool_address = p.address
				AND f.source = 'pool' AND f.state = 'landed' AND f.updated_at > p.after), 0)
		FROM unnest($1::text[], $2::timestamptz[]) AS p(address, after)`, addrs, after).
		Query(func(rows pgx.Rows) error {
			defer rows.Close()
			for rows.Next() {
				var a string
				var n int64
				if err := rows.Scan(&a, &n); err != nil {
					return err
				}
				inflight[a] = n
			}
			return rows.Err()
		})
	if err := tx.SendBatch(ctx, lock).Close(); err != nil {
		return 0, 0, err
	}
	remaining := o.Amount
	seq := 0
	for _, a := range order {
		fg, ours := figures[a]
		if !ours {
			continue
		}
		avail := (fg.can - inflight[fg.pool.String()]) / tron.SunPerTRX * tron.SunPerTRX // delegations move whole TRX
		if avail < tron.SunPerTRX {
			continue
		}
		need, err := f.balanceFor(remaining, limit, weight)
		if err != nil {
			return 0, 0, err
		}
		take, amount := need, remaining
		if need > avail {
			take = avail
			got, err := tron.EnergyForBalance(take, limit, weight)
			if err != nil {
				return 0, 0, err
			}
			amount = min(remaining, got*10_000/(10_000+f.o.MarginBps))
			if amount <= 0 {
				continue
			}
		}
		b.Queue(`INSERT INTO order_fills (order_id, seq, source, pool_address, amount, balance_sun, state)
			VALUES ($1, $2, 'pool', $3, $4, $5, 'reserved')`, o.ID, seq, fg.pool.String(), amount, take)
		seq++
		remaining -= amount
		if remaining <= 0 {
			break
		}
	}
	return seq, remaining, nil
}

func pricingResource(r orders.Resource) pricing.Resource { return pricing.Resource(r) }

func tierOf(o orderstore.Row) pricing.Tier {
	if o.Tier == nil {
		return ""
	}
	return pricing.Tier(*o.Tier)
}

// balanceFor is the staked balance (whole TRX, with the drift margin) that yields units.
func (f *Flow) balanceFor(units, limit, weight int64) (int64, error) {
	b, err := tron.BalanceForEnergy(units, limit, weight)
	if err != nil {
		return 0, err
	}
	b += b * f.o.MarginBps / 10_000
	b = (b + tron.SunPerTRX - 1) / tron.SunPerTRX * tron.SunPerTRX
	return max(b, tron.SunPerTRX), nil
}

// deliver activates the receiver when asked and needed, then signs and broadcasts one
// delegation per fill. It returns an action that broadcasts after commit.
func (f *Flow) deliver(ctx context.Context, tx pgx.Tx, o orderstore.Row, pre *loaded) (bool, action, error) {
	now := f.o.Now()
	js, err := pre.journalOf(ctx, tx, o.ID)
	if err != nil {
		return false, nil, err
	}
	receiver, err := tron.ParseAddress(o.Receiver)
	if err != nil {
		return false, nil, err
	}

	// Activation first: a delegation to an account that does not exist is refused.
	if o.ActivationAmountSun > 0 && !o.Activation.Performed {
		j, ok := latest(js, purposeActivate, -1)
		if ok && resignable(j) && j.Attempt < maxDelegateAttempts-1 {
			if j, err = f.confirmGone(ctx, tx, j); err != nil {
				return false, nil, err
			}
		}
		if !ok || (j.State == stateDropped && resignable(j) && j.Attempt < maxDelegateAttempts-1) {
			attempt := 0
			if ok {
				attempt = j.Attempt + 1
			}
			if len(f.o.Pools) == 0 {
				return true, nil, f.fail(ctx, tx, o, apierr.DelegationFailed, "no own account is configured to activate the receiver from")
			}
			owner := f.o.Pools[0].Address()
			c := &tron.AccountCreateContract{OwnerAddress: owner, AccountAddress: receiver}
			j, err = f.sign(ctx, tx, o, purposeActivate, -1, attempt, tron.Intent{Contract: c}, func(ctx context.Context) (*tron.Transaction, error) {
				return f.o.Node.CreateAccount(ctx, c)
			})
			if err != nil {
				return false, nil, err
			}
		}
		switch j.State {
		case stateSigned:
			return false, f.broadcastAll([]journalRow{j}), f.setDue(ctx, tx, o, now.Add(f.o.RetryEvery))
		case stateDropped, stateFailed:
			return true, nil, f.fail(ctx, tx, o, apierr.DelegationFailed, "the receiver's activation was refused by the chain")
		case stateBroadcast, stateLanded:
			// Delegating needs the account in a block, not yet at confirmation depth.
			info, err := f.o.Node.GetTransactionInfoByID(ctx, j.TxID)
			if errors.Is(err, tron.ErrNotFound) {
				return f.landedOrDropped(ctx, tx, o, j)
			}
			if err != nil {
				return false, nil, err
			}
			if info.Result == "FAILED" {
				return true, nil, f.fail(ctx, tx, o, apierr.DelegationFailed, "the receiver's activation failed on chain")
			}
			if _, err := tx.Exec(ctx, `UPDATE orders SET activation_performed = true, activation_hash = $2, updated_at = now() WHERE id = $1`,
				o.ID, j.TxID); err != nil {
				return false, nil, err
			}
			return true, nil, nil
		}
	}
	if o.Resource == orders.Activation {
		// Nothing to delegate: the order is delivered once its activation is (or was
		// already) on chain.
		return true, nil, f.setStatus(ctx, tx, o, orders.Delegated, now.Add(f.o.RetryEvery))
	}

	// Nothing above wrote fills (the activation's branch returns in every case).
	fs, err := pre.fillsOf(ctx, tx, o.ID)
	if err != nil {
		return false, nil, err
	}
	var pending []journalRow
	allSent := true
	// The fills' broadcast marks travel in one batch after the loop (nothing in it reads
	// them), with the read of the hashes when everything was sent.
	marks := &pgx.Batch{}
	for _, fl := range fs {
		if fl.State != "reserved" {
			continue
		}
		if fl.Source != sourcePool && fl.Source != sourceDeep {
			if err := f.buyFromProvider(ctx, tx, o, fl); err != nil {
				return false, nil, err
			}
			allSent = false // look again: bought (broadcast), or handed to the next provider
			continue
		}
		j, ok := latest(js, purposeDelegate, fl.Seq)
		if ok && resignable(j) && j.Attempt < maxDelegateAttempts-1 {
			if j, err = f.confirmGone(ctx, tx, j); err != nil {
				return false, nil, err
			}
		}
		if !ok || (j.State == stateDropped && resignable(j) && j.Attempt < maxDelegateAttempts-1) {
			attempt := 0
			if ok {
				attempt = j.Attempt + 1
			}
			intent, build, err := f.delegation(ctx, o, fl, receiver)
			if errors.Is(err, errUndeliverable) {
				if marks.Len() > 0 { // the failure sees the fills as they are
					if err := tx.SendBatch(ctx, marks).Close(); err != nil {
						return false, nil, err
					}
				}
				return true, nil, f.fail(ctx, tx, o, apierr.DelegationFailed, err.Error())
			}
			if err != nil {
				return false, nil, err
			}
			j, err = f.sign(ctx, tx, o, purposeDelegate, fl.Seq, attempt, intent, build)
			if err != nil {
				var ne *tron.NodeError
				if errors.As(err, &ne) && ne.Code != "" {
					// The node refused to build it (the pool changed under us): this
					// part cannot be delivered.
					f.log.Info("delegation refused at build", "order", o.ID, "fill", fl.Seq, "err", err)
					if _, err := tx.Exec(ctx, `UPDATE order_fills SET state = 'failed', updated_at = now() WHERE order_id = $1 AND seq = $2`, o.ID, fl.Seq); err != nil {
						return false, nil, err
					}
					continue
				}
				return false, nil, err
			}
		}
		switch j.State {
		case stateSigned:
			pending = append(pending, j)
			allSent = false
		case stateDropped, stateFailed:
			if _, err := tx.Exec(ctx, `UPDATE order_fills SET state = 'failed', updated_at = now() WHERE order_id = $1 AND seq = $2`, o.ID, fl.Seq); err != nil {
				return false, nil, err
			}
		default: // broadcast or landed
			marks.Queue(`UPDATE order_fills SET state = 'broadcast', delegate_txid = $3, updated_at = now()
				WHERE order_id = $1 AND seq = $2`, o.ID, fl.Seq, j.TxID)
		}
	}
	if !allSent {
		if marks.Len() > 0 {
			if err := tx.SendBatch(ctx, marks).Close(); err != nil {
				return false, nil, err
			}
		}
		return false, f.broadcastAll(pending), f.setDue(ctx, tx, o, now.Add(f.o.RetryEvery))
	}
	var hashes []string
	marks.Queue(`SELECT coalesce(array_agg(delegate_txid ORDER BY seq), '{}') FROM order_fills
		WHERE order_id = $1 AND state = 'broadcast'`, o.ID).QueryRow(func(r pgx.Row) error { return r.Scan(&hashes) })
	if err := tx.SendBatch(ctx, marks).Close(); err != nil {
		return false, nil, err
	}
	if len(hashes) == 0 {
		var onlyProviders bool
		if err := tx.QueryRow(ctx, `SELECT coalesce(bool_and(source <> 'pool'), false) FROM order_fills WHERE order_id = $1`, o.ID).
			Scan(&onlyProviders); err != nil {
			return false, nil, err
		}
		if onlyProviders {
			return true, nil, f.fail(ctx, tx, o, apierr.InsufficientSupply, "the providers could not deliver the order")
		}
		return true, nil, f.fail(ctx, tx, o, apierr.DelegationFailed, "every delegation was refused by the chain")
	}
	// Settling at once is worth a step only when a delegation's block result is already
	// in: otherwise its chain fact, applied after this commit, advances the order (and the
	// LandGrace timer covers a fact that never comes).
	settleNow := false
	for _, j := range js {
		if j.Purpose == purposeDelegate && j.settled() {
			settleNow = true
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE orders SET delegate_hashes = $2, status = $3, next_due_at = $4, updated_at = now() WHERE id = $1`,
		o.ID, hashes, string(orders.Delegated), now.Add(f.o.LandGrace)); err != nil {
		return false, nil, err
	}
	f.transitions.WithLabelValues(string(orders.Delegated)).Inc()
	return settleNow, nil, nil
}

// errUndeliverable marks a fill that can never be delegated as ordered.
var errUndeliverable = errors.New("undeliverable")

// delegation is the transaction that delivers a fill: a delegation from one of our pools
// locked for the tier, or a rent call of the deep reserve paid by the first pool (the
// contract delegates from its own address, locked for the tier, and takes it back itself).
func (f *Flow) delegation(ctx context.Context, o orderstore.Row, fl fill, receiver tron.Address) (tron.Intent,
	func(context.Context) (*tron.Transaction, error), error) {
	if fl.Source == sourceDeep {
		if f.o.Deep == nil || len(f.o.Pools) == 0 {
			return tron.Intent{}, nil, fmt.Errorf("%w: the deep reserve is not configured", errUndeliverable)
		}
		secs := *o.DurationSeconds
		price, err := f.o.Deep.RentalPrice(ctx, fl.Amount, secs)
		if err != nil {
			return tron.Intent{}, nil, err
		}
		c := &tron.TriggerSmartContract{OwnerAddress: f.o.Pools[0].Address(), ContractAddress: f.o.Deep.Contract(),
			CallValue: price, Data: f.o.Deep.RentCall(receiver, fl.Amount, secs)}
		return tron.Intent{Contract: c, FeeLimit: f.o.DeepFeeLimit}, func(ctx context.Context) (*tron.Transaction, error) {
			return f.o.Node.TriggerSmartContract(ctx, c, f.o.DeepFeeLimit)
		}, nil
	}
	lock, err := orders.LockPeriodBlocks(*o.DurationSeconds, f.lockCap)
	if err != nil {
		return tron.Intent{}, nil, fmt.Errorf("%w: %v", errUndeliverable, err)
	}
	c := &tron.DelegateResourceContract{OwnerAddress: fl.Pool, Resource: resourceCode(o.Resource), Balance: fl.BalanceSun,
		ReceiverAddress: receiver, Lock: true, LockPeriod: lock}
	return tron.Intent{Contract: c}, func(ctx context.Context) (*tron.Transaction, error) {
		return f.o.Node.DelegateResource(ctx, c)
	}, nil
}

// maxDelegateAttempts bounds how often one fill's delegation is signed.
const maxDelegateAttempts = 3

// resignable reports whether a journaled transaction the node refused as expired (or with a
// reference block it no longer knows) may be replaced by a new one. java-tron checks TaPoS
// and expiration before it looks for duplicates, so such a refusal says nothing about
// whether an earlier broadcast of the same bytes landed: confirmGone asks the node before
// anything is signed again. A transaction the network never took (a crash or a stall
// between signing and broadcasting outlived its minute) is retried rather than failed.
func resignable(j journalRow) bool {
	if j.State != stateDropped || j.Result == nil {
		return false
	}
	r := *j.Result
	return strings.HasPrefix(r, "TRANSACTION_EXPIRATION_ERROR") || strings.HasPrefix(r, "TAPOS_ERROR")
}

// confirmGone checks with the node that a transaction refused as expired is in no block
// and not waiting for one. If the node has it after all (an earlier broadcast whose answer
// was lost), the journal row goes back to broadcast and the chain settles it; only a
// transaction the node does not know stays dropped and may be signed again.
func (f *Flow) confirmGone(ctx context.Context, tx pgx.Tx, j journalRow) (journalRow, error) {
	_, err := f.o.Node.GetTransactionInfoByID(ctx, j.TxID)
	if errors.Is(err, tron.ErrNotFound) {
		_, err = f.o.Node.GetTransactionByID(ctx, j.TxID)
		if errors.Is(err, tron.ErrNotFound) {
			return j, nil // gone for good
		}
	}
	if err != nil {
		return j, err
	}
	f.log.Warn("a transaction refused as expired is known to the node; waiting for its block", "txid", j.TxID, "purpose", j.Purpose)
	if _, err := tx.Exec(ctx, `UPDATE signed_txs SET state = 'broadcast', result = NULL, updated_at = now() WHERE txid = $1`, j.TxID); err != nil {
		return j, err
	}
	j.State, j.Result = stateBroadcast, nil
	return j, nil
}

// landedOrDropped decides about a broadcast transaction the node does not show in a
// block: past its expiration on the chain's clock it can never land (dropped); before, the
// order waits.
func (f *Flow) landedOrDropped(ctx context.Context, tx pgx.Tx, o orderstore.Row, j journalRow) (bool, action, error) {
	head, err := f.headTime(ctx)
	if err != nil {
		return false, nil, err
	}
	if head > j.Expiration {
		if _, err := tx.Exec(ctx, `UPDATE signed_txs SET state = 'dropped', result = 'EXPIRED_OUTSIDE_BLOCK', updated_at = now()
			WHERE txid = $1 AND state IN ('signed', 'broadcast')`, j.TxID); err != nil {
			return false, nil, err
		}
		return true, nil, nil
	}
	return f.wait(ctx, tx, o, f.o.Now().Add(f.o.RetryEvery))
}

// settle waits for every delegation's block result (chain facts set the journal rows),
// then confirms what landed after checking the receiver's delegated balance on chain, or
// fails the order when nothing did.
func (f *Flow) settle(ctx context.Context, tx pgx.Tx, o orderstore.Row, pre *loaded) (bool, action, error) {
	now := f.o.Now()
	js, err := pre.journalOf(ctx, tx, o.ID)
	if err != nil {
		return false, nil, err
	}
	fs, err := pre.fillsOf(ctx, tx, o.ID)
	if err != nil {
		return false, nil, err
	}
	// The fills' new states are kept in fs as written; the journal is read again only when
	// the node's answer settled a row of it here (normally chain facts did before).
	journalWritten := false
	for i, fl := range fs {
		if fl.State != "broadcast" {
			continue
		}
		j, ok := latest(js, purposeDelegate, fl.Seq)
		if !ok {
			return false, nil, fmt.Errorf("fill %d broadcast without a journal row", fl.Seq)
		}
		if !j.settled() {
			journalWritten = true
			info, err := f.o.Node.GetTransactionInfoByID(ctx, j.TxID)
			if errors.Is(err, tron.ErrNotFound) {
				return f.landedOrDropped(ctx, tx, o, j)
			}
			if err != nil {
				return false, nil, err
			}
			// In a block. Its chain fact normally settles it; when the fact is late (the
			// follower or this consumer group is behind) and the node shows the block at
			// the confirmation depth, the node's answer settles it instead.
			if j, err = f.settleFromNode(ctx, tx, j, info); err != nil {
				return false, nil, err
			}
			if !j.settled() {
				return f.wait(ctx, tx, o, now.Add(f.o.LandGrace))
			}
		}
		state := "landed"
		if j.State != stateLanded || (j.Result != nil && *j.Result != "SUCCESS") {
			state = "failed"
		}
		if _, err := tx.Exec(ctx, `UPDATE order_fills SET state = $3, updated_at = now() WHERE order_id = $1 AND seq = $2`, o.ID, fl.Seq, state); err != nil {
			return false, nil, err
		}
		fs[i].State = state
	}
	if journalWritten {
		if js, err = journal(ctx, tx, o.ID); err != nil {
			return false, nil, err
		}
	}
	// delegated_at is the block of the first delegation that landed, whichever pass of
	// this step saw it land.
	var firstBlock *time.Time
	var delivered int64
	byPool := map[tron.Address]int64{}
	for _, fl := range fs {
		if fl.State != "landed" {
			continue
		}
		delivered += fl.Amount
		if fl.Source == sourceDeep {
			// The contract sized the delegation at its block's weights: allow the drift.
			byPool[fl.Pool] += fl.BalanceSun * (10_000 - f.o.MarginBps) / 10_000
		} else {
			byPool[fl.Pool] += fl.BalanceSun
		}
		if j, ok := latest(js, purposeDelegate, fl.Seq); ok && j.BlockTime != nil && (firstBlock == nil || j.BlockTime.Before(*firstBlock)) {
			t := *j.BlockTime
			firstBlock = &t
		}
	}
	if o.Resource != orders.Activation && delivered == 0 {
		return true, nil, f.fail(ctx, tx, o, apierr.DelegationFailed, "no delegation landed on chain before its expiration")
	}
	// The receiver's limit, verified on chain: each pool's delegation to the receiver
	// covers at least what this order's landed fills put there.
	receiver, _ := tron.ParseAddress(o.Receiver)
	for pool, want := range byPool {
		ds, err := f.o.Node.GetDelegatedResourceV2(ctx, pool, receiver)
		if err != nil {
			return false, nil, fmt.Errorf("verify delegation: %w", err)
		}
		var have int64
		for _, d := range ds {
			if o.Resource == orders.Bandwidth {
				have += d.FrozenBalanceForBandwidth
			} else {
				have += d.FrozenBalanceForEnergy
			}
		}
		if have < want {
			f.log.Warn("receiver's delegated balance below the order's fills; checking again", "order", o.ID, "pool", pool, "have", have, "want", want)
			return f.wait(ctx, tx, o, now.Add(f.o.RetryEvery))
		}
	}
	return false, nil, f.confirm(ctx, tx, o, delivered, firstBlock)
}

// confirm records the delivery: the charge captured, a pro-rata refund for a partial
// delivery, the totals, order.confirmed, the order active and its expiry timer.
func (f *Flow) confirm(ctx context.Context, tx pgx.Tx, o orderstore.Row, delivered int64, firstBlock *time.Time) error {
	now := f.o.Now()
	at := now
	if firstBlock != nil && firstBlock.Before(now) {
		at = *firstBlock // the chain's clock, unless a simulated chain runs ahead of the wall
	}
	at = at.UTC().Truncate(time.Millisecond)
	if err := f.o.Ledger.CaptureHold(ctx, tx, o.ID, o.ChargedAmountSun); err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	var refund int64
	partial := false
	if o.Resource != orders.Activation {
		partial = delivered < o.Amount
		refund = orders.ProRataRefund(o.EnergyAmountSun, o.Amount, delivered)
		if refund > 0 {
			if err := f.o.Ledger.Refund(ctx, tx, o.AccountID, "partial_delivery:"+o.ID, refund, "partial_delivery", o.ID); err != nil {
				return fmt.Errorf("partial refund: %w", err)
			}
		}
		if o.Resource == orders.Energy {
			if err := f.o.Ledger.AddOrderTotals(ctx, tx, o.AccountID, 0, delivered); err != nil {
				return err
			}
		}
	} else {
		delivered = o.Amount
	}
	var expires *time.Time
	if o.DurationSeconds != nil {
		t := at.Add(time.Duration(*o.DurationSeconds) * time.Second)
		expires = &t
	}
	// Confirmed, and at once active (the spec's automatic step): both in this transaction,
	// so the order is due next at its expiry (an activation never).
	row, err := orderstore.UpdateReturning(ctx, tx, `UPDATE orders SET status = 'active', delivered_amount = $2, partial = $3,
			refunded_amount_sun = refunded_amount_sun + $4, delegated_at = $5, expires_at = $6, next_due_at = $6, updated_at = now()
		WHERE id = $1`, o.ID, delivered, partial, refund, at, expires)
	if err != nil {
		return err
	}
	f.transitions.WithLabelValues(string(orders.Confirmed)).Inc()
	f.transitions.WithLabelValues(string(orders.Active)).Inc()
	f.deliverySec.Observe(now.Sub(time.Time(o.CreatedAt)).Seconds())
	return f.emit(ctx, tx, row, orders.EventConfirmed, row.Record.Confirmed())
}

// takeBack ends an active rental at expires_at, or early when the customer reclaimed it:
// one undelegation per landed fill, journaled like the delegations. The order ends (and its
// event leaves, with the undelegation as reclaim_hash) only once every undelegation is in a
// block: one that fails, is refused or expires outside a block is signed again. The chain
// refuses an undelegation while the delegation's lock runs; the step then tries again a
// little later (the lock covers the tier, so an early reclaim takes effect when the chain
// allows).
func (f *Flow) takeBack(ctx context.Context, tx pgx.Tx, o orderstore.Row, pre *loaded) (bool, action, error) {
	now := f.o.Now()
	reclaim := o.ReclaimRequestedAt != nil
	if o.Resource == orders.Activation || o.ExpiresAt == nil {
		// An activation has no rental to end.
		if o.NextDueAt != nil {
			_, err := tx.Exec(ctx, `UPDATE orders SET next_due_at = NULL WHERE id = $1`, o.ID)
			return false, nil, err
		}
		return false, nil, nil
	}
	expires := time.Time(*o.ExpiresAt)
	if !reclaim && now.Before(expires) {
		return f.wait(ctx, tx, o, expires)
	}
	hashes, next, after, err := f.returnStake(ctx, tx, o, pre)
	if err != nil || next != nil {
		return false, after, err
	}
	to, typ := orders.Expired, orders.EventExpired
	if reclaim {
		to, typ = orders.Reclaimed, orders.EventReclaimed
	}
	var hash *string
	if len(hashes) > 0 {
		hash = &hashes[0]
	}
	at := now.UTC().Truncate(time.Millisecond)
	if _, err := tx.Exec(ctx, `UPDATE orders SET status = $2, reclaim_hash = $3, ended_at = $4, next_due_at = NULL, updated_at = now() WHERE id = $1`,
		o.ID, string(to), hash, at); err != nil {
		return false, nil, err
	}
	f.transitions.WithLabelValues(string(to)).Inc()
	o.Status = to
	return false, nil, f.emit(ctx, tx, o, typ, o.Record.Ended(reclaim, hash, at))
}

// returnStake undelegates every landed fill of our own pools, journaled like the
// delegations, and reports the undelegation hashes once every one of them is in a block
// (the fills are then marked returned). Until then next is when to look again (already set
// as the order's due time) and after broadcasts what was just signed. An undelegation that
// fails, is refused or expires outside a block is signed again; the chain refuses one while
// the delegation's lock runs, and the step tries again a little later.
func (f *Flow) returnStake(ctx context.Context, tx pgx.Tx, o orderstore.Row, pre *loaded) (hashes []string, next *time.Time, after action, err error) {
	now := f.o.Now()
	due5 := now.Add(5 * f.o.RetryEvery)
	js, err := pre.journalOf(ctx, tx, o.ID)
	if err != nil {
		return nil, nil, nil, err
	}
	fs, err := pre.fillsOf(ctx, tx, o.ID)
	if err != nil {
		return nil, nil, nil, err
	}
	receiver, _ := tron.ParseAddress(o.Receiver)
	var pending []journalRow
	done := true
	own := 0
	for _, fl := range fs {
		if fl.Source != sourcePool || (fl.State != "landed" && fl.State != "returned") {
			continue // a provider or the deep reserve takes its own delegation back
		}
		own++
		j, ok := latest(js, purposeUndelegate, fl.Seq)
		if ok && resignable(j) {
			if j, err = f.confirmGone(ctx, tx, j); err != nil {
				return nil, nil, nil, err
			}
		}
		if !ok || j.State == stateDropped || j.State == stateFailed {
			attempt := 0
			if ok {
				attempt = j.Attempt + 1
			}
			c := &tron.UnDelegateResourceContract{OwnerAddress: fl.Pool, Resource: resourceCode(o.Resource), Balance: fl.BalanceSun,
				ReceiverAddress: receiver}
			j, err = f.sign(ctx, tx, o, purposeUndelegate, fl.Seq, attempt, tron.Intent{Contract: c}, func(ctx context.Context) (*tron.Transaction, error) {
				return f.o.Node.UnDelegateResource(ctx, c)
			})
			if err != nil {
				var ne *tron.NodeError
				if errors.As(err, &ne) {
					// Still locked (or the node says no for now): later.
					f.log.Info("undelegation not possible yet", "order", o.ID, "fill", fl.Seq, "err", err)
					return nil, &due5, nil, f.setDue(ctx, tx, o, due5)
				}
				return nil, nil, nil, err
			}
		}
		if j.State == stateBroadcast {
			// The rental ends when the stake is back, not when we asked for it: wait
			// for the undelegation's block (its chain fact, or the node once the block
			// is deep enough). One that expires outside any block is signed again.
			if j, err = f.undelegationFate(ctx, tx, j); err != nil {
				return nil, nil, nil, err
			}
		}
		switch j.State {
		case stateSigned:
			pending = append(pending, j)
			done = false
		case stateLanded:
			hashes = append(hashes, j.TxID)
		}
	}
	retry := now.Add(f.o.RetryEvery)
	if !done {
		return nil, &retry, f.broadcastAll(pending), f.setDue(ctx, tx, o, retry)
	}
	if len(hashes) < own {
		// Undelegations still on their way to a block, or refused and signed again by the
		// next step.
		return nil, &retry, nil, f.setDue(ctx, tx, o, retry)
	}
	if _, err := tx.Exec(ctx, `UPDATE order_fills SET state = 'returned', updated_at = now() WHERE order_id = $1 AND state = 'landed'`, o.ID); err != nil {
		return nil, nil, nil, err
	}
	return hashes, nil, nil, nil
}

// setDue sets the order's next look.
func (f *Flow) setDue(ctx context.Context, tx pgx.Tx, o orderstore.Row, at time.Time) error {
	_, err := tx.Exec(ctx, `UPDATE orders SET next_due_at = $2 WHERE id = $1`, o.ID, at)
	return err
}

// undelegationFate settles a broadcast undelegation from the node when its block is deep
// enough, or marks it dropped when it expired outside any block; otherwise it is returned
// unchanged (still on its way).
func (f *Flow) undelegationFate(ctx context.Context, tx pgx.Tx, j journalRow) (journalRow, error) {
	info, err := f.o.Node.GetTransactionInfoByID(ctx, j.TxID)
	if err == nil {
		return f.settleFromNode(ctx, tx, j, info)
	}
	if !errors.Is(err, tron.ErrNotFound) {
		return j, err
	}
	head, err := f.headTime(ctx)
	if err != nil || head <= j.Expiration {
		return j, err
	}
	if _, err := tx.Exec(ctx, `UPDATE signed_txs SET state = 'dropped', result = 'EXPIRED_OUTSIDE_BLOCK', updated_at = now()
		WHERE txid = $1 AND state IN ('signed', 'broadcast')`, j.TxID); err != nil {
		return j, err
	}
	j.State = stateDropped
	return j, nil
}

// headTime is the chain's clock: the newest block's timestamp, unix ms.
func (f *Flow) headTime(ctx context.Context) (int64, error) {
	b, err := f.o.Node.GetNowBlock(ctx)
	if err != nil {
		return 0, err
	}
	return b.BlockHeader.RawData.Timestamp, nil
}

// settleFromNode records a transaction's block result from the node when its block is at
// least Confirmations deep; otherwise j is returned unchanged.
func (f *Flow) settleFromNode(ctx context.Context, tx pgx.Tx, j journalRow, info *tron.TransactionInfo) (journalRow, error) {
	head, err := f.o.Node.GetNowBlock(ctx)
	if err != nil {
		return j, err
	}
	if head.BlockHeader.RawData.Number-info.BlockNumber < int64(f.o.Confirmations) {
		return j, nil
	}
	state, result := stateLanded, "SUCCESS"
	if info.Result == "FAILED" {
		state, result = stateFailed, "FAILED"
	}
	bt := time.UnixMilli(info.BlockTimeStamp).UTC()
	if _, err := tx.Exec(ctx, `UPDATE signed_txs SET state = $2, result = $3, block_num = $4, block_time = $5, updated_at = now()
		WHERE txid = $1 AND state IN ('signed', 'broadcast')`, j.TxID, state, result, info.BlockNumber, bt); err != nil {
		return j, err
	}
	j.State, j.Result, j.BlockTime = state, &result, &bt
	return j, nil
}
