package orderstore

import (
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"rental/infra/outbox"
	"rental/schemas/topics"
)

// Group writes for order creation's group commit (docs/orders.md "Group commit"): the
// in-flight counts of several accounts in one statement, and several new orders with their
// intents in two. The caller holds the accounts' ledger rows locked, which serialises
// creations per account, so the counts stay exact until it commits.

// InFlightCounts is QueueInFlight's answer once its batch ran.
type InFlightCounts struct {
	n map[string]int
}

// Of is the account's number of orders waiting for delivery.
func (c *InFlightCounts) Of(accountID string) int { return c.n[accountID] }

// QueueInFlight queues InFlight for several accounts. A count stops at limit (limit <= 0:
// no count is made, every account reads 0): the caller needs to know only whether an
// account is below it, and a backlog longer than the limit is not walked.
func QueueInFlight(b *pgx.Batch, accountIDs []string, limit int) *InFlightCounts {
	c := &InFlightCounts{n: map[string]int{}}
	if limit <= 0 {
		return c
	}
	ids := slices.Clone(accountIDs)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	b.Queue(`SELECT a.id, (SELECT count(*) FROM (SELECT 1 FROM orders o WHERE o.account_id = a.id
			AND o.status IN ('created', 'paid', 'allocating', 'delegated') LIMIT $2) l)
		FROM unnest($1::text[]) AS a(id)`, ids, limit).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var id string
			var n int
			if err := rows.Scan(&id, &n); err != nil {
				return err
			}
			c.n[id] = n
		}
		return rows.Err()
	})
	return c
}

// QueueInsertMany queues the rows and processing intents of new orders, each as
// QueueInsertLimited writes it, with no limit (the caller admitted them). It returns the
// rows as they will read back (Created).
func QueueInsertMany(b *pgx.Batch, ns []NewOrder) ([]Row, error) {
	k := len(ns)
	rows := make([]Row, k)
	var (
		id, acc, netw, client, resource, receiver = make([]string, k), make([]string, k), make([]string, k), make([]string, k), make([]string, k), make([]string, k)
		batch, sub, tier, quote                   = make([]*string, k), make([]*string, k), make([]*string, k), make([]*string, k)
		amount, unit, energy, activation, total   = make([]int64, k), make([]int64, k), make([]int64, k), make([]int64, k), make([]int64, k)
		duration, maxPrice                        = make([]*int64, k), make([]*int64, k)
		activate                                  = make([]bool, k)
		created, due                              = make([]time.Time, k), make([]time.Time, k)
		intents                                   = make([][]byte, k)
	)
	for i, n := range ns {
		if n.ID == "" || n.AccountID == "" || n.ClientOrderID == "" {
			return nil, errors.New("orderstore: order without id, account or client_order_id")
		}
		rows[i] = Created(n)
		id[i], acc[i], netw[i], client[i], resource[i], receiver[i] = n.ID, n.AccountID, string(n.Network), n.ClientOrderID, string(n.Resource), n.Receiver
		batch[i], sub[i], tier[i], quote[i] = n.BatchID, n.SubscriptionID, n.Tier, n.QuoteID
		amount[i], unit[i], energy[i], activation[i], total[i] = n.Amount, n.UnitPriceCenti, n.EnergyAmountSun, n.ActivationAmountSun, n.Total()
		duration[i], maxPrice[i], activate[i] = n.DurationSeconds, n.MaxPriceSun, n.Activate
		created[i], due[i] = time.Time(rows[i].CreatedAt), *rows[i].NextDueAt
		intents[i], _ = json.Marshal(Intent{OrderID: n.ID, Kind: IntentProcess})
	}
	b.Queue(`INSERT INTO orders (id, account_id, network, client_order_id, batch_id, subscription_id,
			status, resource, amount, tier, duration_seconds, receiver, activate, unit_price_centi, energy_amount_sun,
			activation_amount_sun, total_amount_sun, charged_amount_sun, quote_id, max_price_sun, created_at, updated_at,
			next_due_at)
		SELECT id, account_id, network, client_order_id, batch_id, subscription_id, 'created', resource, amount, tier,
			duration, receiver, activate, unit, energy, activation, total, total, quote_id, max_price, created, created, due
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[],
			$9::text[], $10::integer[], $11::text[], $12::boolean[], $13::bigint[], $14::bigint[], $15::bigint[],
			$16::bigint[], $17::text[], $18::bigint[], $19::timestamptz[], $20::timestamptz[])
			AS u(id, account_id, network, client_order_id, batch_id, subscription_id, resource, amount, tier, duration,
				receiver, activate, unit, energy, activation, total, quote_id, max_price, created, due)`,
		id, acc, netw, client, batch, sub, resource, amount, tier, duration, receiver, activate, unit, energy, activation,
		total, quote, maxPrice, created, due)
	// The intents in the orders' order, in the same round trip.
	if err := outbox.QueueRecords(b, topics.OrderIntents, id, intents, map[string]string{"kind": string(IntentProcess)}); err != nil {
		return nil, err
	}
	return rows, nil
}

// LiveEnergy is QueueReceiversLiveEnergy's answer once its batch ran.
type LiveEnergy struct {
	n map[string]int64
}

// Of is the energy the receiver holds from live orders.
func (l *LiveEnergy) Of(receiver string) int64 { return l.n[receiver] }

// receiversLiveEnergySQL answers (receiver, live energy) for each receiver of $1 at $2: the
// running total of its live energy orders (receiver_live_energy, kept by triggers,
// migration 00027) less those already past expires_at, which the processor has not ended
// yet (few: orders_receiver_expiry finds them by receiver and expiry).
const receiversLiveEnergySQL = `SELECT r, (coalesce((SELECT t.energy FROM receiver_live_energy t WHERE t.receiver = r), 0)
		- (SELECT coalesce(sum(o.amount), 0) FROM orders o
			WHERE o.receiver = r AND o.expires_at <= $2 AND o.resource = 'energy'
			  AND o.status IN ('created', 'paid', 'allocating', 'delegated', 'confirmed', 'active')))::bigint
	FROM unnest($1::text[]) AS r`

// QueueReceiversLiveEnergy queues ReceiverLiveEnergy for several receivers in one
// statement.
func QueueReceiversLiveEnergy(b *pgx.Batch, receivers []string, now time.Time) *LiveEnergy {
	l := &LiveEnergy{n: map[string]int64{}}
	b.Queue(receiversLiveEnergySQL, receivers, now.UTC()).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var r string
			var n int64
			if err := rows.Scan(&r, &n); err != nil {
				return err
			}
			l.n[r] = n
		}
		return rows.Err()
	})
	return l
}
