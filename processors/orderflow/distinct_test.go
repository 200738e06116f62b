package orderflow

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/testenv"
	"rental/infra/tronsim"
	"rental/schemas/network"
	"rental/schemas/orders"
)

// simBlockInterval is java-tron's block interval, on the simulator's wall clock.
const simBlockInterval = 3 * time.Second

// Five concurrent identical orders (one pool, one receiver, same amount and tier) are all
// delegated within two block intervals: every delegation lands in one of the two blocks
// after the head at which the orders were placed, each its own transaction. Measured on
// the simulator's blocks, whichever way the node stamps the transactions it builds:
// java-tron's wall clock in milliseconds, or the head block's time (byte-identical builds
// within one block, which the processor makes unique before signing: uniqueStamp).
func TestFiveIdenticalOrdersDelegatedWithinTwoBlocks(t *testing.T) {
	for _, tc := range []struct {
		name     string
		headTime bool
	}{{"node stamps wall clock ms", false}, {"node stamps head block time", true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvSim(t, network.Mainnet, nil, testenv.Kafka(t), func(o *tronsim.Options) {
				o.BlockInterval, o.StampHeadTime = simBlockInterval, tc.headTime
			})
			ctx := context.Background()
			e.startFlow()
			acc := e.account(1_000)
			// Warm up: the consumer group has joined and the pool's state is cached.
			warm := e.order(acc, orderSpec{resource: orders.Energy, amount: 65_000, tier: "1h", receiver: e.receiver(true)})
			e.waitStatus(acc, warm.ID, time.Minute, orders.Active)

			to := e.receiver(true)
			head, err := e.node.GetNowBlock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			placedAt := head.Number()
			var ids []string
			for range 5 {
				ids = append(ids, e.order(acc, orderSpec{resource: orders.Energy, amount: 65_000, tier: "1h", receiver: to}).ID)
			}

			txids := map[string]string{} // landed delegation -> order
			for _, id := range ids {
				if row := e.waitStatus(acc, id, time.Minute, orders.Active, orders.Failed); row.Status != orders.Active {
					t.Fatalf("order %s %s: %+v", id, row.Status, row.Failure)
				}
				rows, err := e.db.Pool.Query(ctx, `SELECT txid FROM signed_txs WHERE order_id = $1 AND purpose = 'delegate'`, id)
				if err != nil {
					t.Fatal(err)
				}
				signed, err := pgx.CollectRows(rows, pgx.RowTo[string])
				if err != nil {
					t.Fatal(err)
				}
				landed := 0
				for _, txid := range signed {
					info, err := e.node.GetTransactionInfoByID(ctx, txid)
					if err != nil || info.BlockNumber == 0 {
						continue // an attempt that never landed
					}
					landed++
					if other, dup := txids[txid]; dup {
						t.Fatalf("orders %s and %s share delegation %s", other, id, txid)
					}
					txids[txid] = id
					if info.BlockNumber > placedAt+2 {
						t.Errorf("order %s delegated in block %d, placed at head %d: more than two blocks later (%d signed attempts)",
							id, info.BlockNumber, placedAt, len(signed))
					}
				}
				if landed != 1 {
					t.Fatalf("order %s: %d delegations landed, want 1", id, landed)
				}
			}
			if len(txids) != 5 {
				t.Fatalf("%d distinct delegations, want 5", len(txids))
			}
			if got, want := e.delegated(to, orders.Energy), int64(0); got <= want {
				t.Fatalf("nothing delegated to the receiver on chain")
			}
			e.invariants()
		})
	}
}
