package payments_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"rental/infra/tron"
	"rental/infra/tronsim"
)

// benchBlock is the block interval of the benchmark's chain (TRON's is 3 s; the ratio to
// it is what is compared).
const benchBlock = time.Second

// BenchmarkPayByTransfer measures, for transfers sent at random moments of the block
// interval, the time from the production of the block holding a transfer to the energy
// being on the sender's account (the delegation in a block), and reports its p99 in
// seconds (p99_s) and in block intervals (p99_blocks). One interval means the delegation
// is in the next block: with the wait for the transfer's own block (at most one
// interval), transfer to energy stays under two intervals. Each iteration sends 20
// transfers from 20 wallets, a quarter block apart. Blocks and accounts are watched in the
// simulator's process (no HTTP), every 2 ms.
func BenchmarkPayByTransfer(b *testing.B) {
	e := newEnv(b, func(o *tronsim.Options) { o.BlockInterval = benchBlock })
	ctx := context.Background()
	pay := e.addrs["energy_1h"]
	var mu sync.Mutex
	produced := map[int64]time.Time{}
	watch, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for watch.Err() == nil {
			h := e.chain.Sim.Head().Number
			mu.Lock()
			if _, ok := produced[h]; !ok {
				produced[h] = time.Now()
			}
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	var lat []time.Duration
	for range b.N {
		const n = 20
		wallets := make([]tron.PrivateKey, n)
		for i := range wallets {
			k, err := tron.GenerateKey()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := e.chain.Sim.TransferTRX(k.Address(), 10*tron.SunPerTRX, nil); err != nil {
				b.Fatal(err)
			}
			wallets[i] = k
		}
		for _, k := range wallets {
			e.until("the wallets are funded", func() bool { a, ok := e.chain.Sim.Account(k.Address()); return ok && a.BalanceSun > 0 })
		}
		var wg sync.WaitGroup
		for _, k := range wallets {
			time.Sleep(benchBlock / 4)
			tx := e.send(k, pay, 1_000_000, "")
			wg.Go(func() {
				deadline := time.Now().Add(10 * benchBlock)
				for time.Now().Before(deadline) {
					if a, ok := e.chain.Sim.Account(k.Address()); ok && a.AcquiredEnergySun > 0 {
						got := time.Now()
						p, err := e.store.Get(ctx, tx.TxID)
						if err != nil {
							b.Error(err)
							return
						}
						mu.Lock()
						lat = append(lat, got.Sub(produced[p.BlockNum]))
						mu.Unlock()
						return
					}
					time.Sleep(2 * time.Millisecond)
				}
				b.Errorf("no energy for %s within 10 blocks", k.Address())
			})
		}
		wg.Wait()
	}
	slices.Sort(lat)
	p99 := lat[(len(lat)*99+99)/100-1]
	b.ReportMetric(p99.Seconds(), "p99_s")
	b.ReportMetric(float64(p99)/float64(benchBlock), "p99_blocks")
	b.ReportMetric(benchBlock.Seconds(), "block_s")
}
