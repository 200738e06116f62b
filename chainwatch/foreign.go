package chainwatch

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/metrics"
	"rental/infra/tron"
)

// Foreign use of a pool. Every transaction sent from an own pool (Options.Pools) that the
// service did not sign (neither the order processor's signer journal, chain_tracked_tx, nor
// the sweeper's sweeps) is reported at once: one warning line and
// rental_chainwatch_pool_foreign_use_total{pool,contract}. The watch reads the blocks up to
// the node's head, not the confirmed depth facts wait for, so a stolen signer key or an
// owner key in use shows within one block (docs/custody.md, docs/operations.md).

// foreignScanMax bounds the blocks one scan reads (a node far ahead is caught up over
// several polls).
const foreignScanMax = 100

type foreignWatch struct {
	pools   map[tron.Address]bool
	last    int64            // newest block scanned; 0 before the first scan
	seen    map[string]int64 // reported txids by block, so a block read twice reports once
	counter *prometheus.CounterVec
}

func newForeignWatch(pools []tron.Address, reg prometheus.Registerer) *foreignWatch {
	w := &foreignWatch{pools: map[tron.Address]bool{}, seen: map[string]int64{}}
	for _, p := range pools {
		w.pools[p] = true
	}
	w.counter = metrics.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rental_chainwatch_pool_foreign_use_total",
		Help: "Transactions sent from an own stake pool that the service did not sign, by pool and contract type.",
	}, []string{"pool", "contract"}))
	// The contracts a leaked signer key can send start at 0 for every pool, so the first
	// one is an increase (RentalPoolForeignUse); any other type's series appears at its first count.
	for p := range w.pools {
		for _, c := range []string{tron.DelegateResourceContractType.String(), tron.UnDelegateResourceContractType.String()} {
			w.counter.WithLabelValues(p.String(), c)
		}
	}
	return w
}

// watchForeign scans the blocks after the last scanned one up to the node's head.
func (f *Follower) watchForeign(ctx context.Context) error {
	w := f.foreign
	if w == nil || len(w.pools) == 0 {
		return nil
	}
	head, err := f.o.Source.Head(ctx)
	if err != nil {
		return err
	}
	if w.last == 0 {
		w.last = max(0, head-1) // from the block before the head at start
	}
	if head <= w.last {
		return nil
	}
	from := w.last + 1
	blocks, err := f.o.Source.Blocks(ctx, from, int(min(head-w.last, foreignScanMax)))
	if err != nil {
		return fmt.Errorf("foreign use watch: %w", err)
	}
	var ids []string
	for _, b := range blocks {
		for _, tx := range b.Txs {
			if w.pools[tx.Owner] {
				ids = append(ids, tx.ID)
			}
		}
	}
	ours, err := f.st.SignedByService(ctx, ids)
	if err != nil {
		return fmt.Errorf("foreign use watch: %w", err)
	}
	for _, b := range blocks {
		for _, tx := range b.Txs {
			if !w.pools[tx.Owner] || ours[tx.ID] {
				continue
			}
			if _, done := w.seen[tx.ID]; done {
				continue
			}
			w.seen[tx.ID] = b.Num
			w.counter.WithLabelValues(tx.Owner.String(), tx.ContractType).Inc()
			f.log.Warn("foreign use of a pool: a transaction the service did not sign", "pool", tx.Owner.String(),
				"contract", tx.ContractType, "txid", tx.ID, "block", b.Num, "to", addrText(tx.To), "result", tx.Result)
		}
		w.last = b.Num
	}
	for id, n := range w.seen {
		if n < w.last-1000 {
			delete(w.seen, id)
		}
	}
	return nil
}

func addrText(a tron.Address) string {
	if a.IsZero() {
		return ""
	}
	return a.String()
}
