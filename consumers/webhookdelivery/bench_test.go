package webhookdelivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/outbox"
	"rental/infra/webhooks"
	"rental/schemas/events"
	"rental/schemas/network"
	"rental/schemas/topics"
)

const benchBatch = 2000 // deliveries per benchmark iteration

// BenchmarkWebhookDelivery measures the deliverer: events read from the order topic,
// signed and POSTed to a local receiver that verifies every signature, history written.
// It reports deliveries per second draining a burst, and, at a steady 100 events/s, the
// delay from the outbox commit (relay and Kafka included) to the first attempt's arrival.
func BenchmarkWebhookDelivery(b *testing.B) {
	e := newEnv(b)
	e.endpoint(b, webhooks.RolePrimary, "/hook")
	relay, err := outbox.NewRelay(outbox.RelayOptions{Pool: e.db.Pool, Producer: e.prod, Logger: quiet(),
		Registerer: prometheus.NewRegistry(), SweepEvery: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	relayDone := make(chan struct{})
	go func() { _ = relay.Run(ctx); close(relayDone) }()
	defer func() { cancel(); <-relayDone }()
	e.start(b, nil)

	// Burst: a batch of events put on the order topic at once, as the relay would after a
	// backlog, spread over 500 orders; the clock runs until the receiver has them all.
	publish := func(n, first int) {
		rs := make([]*kgo.Record, n)
		for j := range rs {
			order := fmt.Sprintf("ord_%d", (first+j)%500)
			env, err := events.New("order.confirmed", e.account, network.Nile, map[string]any{"order_id": order, "tier": "1h"})
			if err != nil {
				b.Fatal(err)
			}
			v, _ := json.Marshal(env)
			rs[j] = &kgo.Record{Topic: topics.OrderEvents.Name, Key: []byte(order), Value: v}
		}
		if err := e.prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
	}
	publish(50, 0) // warm-up: consumer groups joined, connections open
	waitFor(b, 60*time.Second, "warm-up deliveries", func() bool { return len(e.rcv.requests()) >= 50 })

	b.ResetTimer()
	start := time.Now()
	want := 50
	for i := 0; i < b.N; i++ {
		publish(benchBatch, want)
		want += benchBatch
		waitFor(b, 120*time.Second, "the batch delivered", func() bool { return len(e.rcv.requests()) >= want })
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N*benchBatch)/elapsed.Seconds(), "deliveries/s")

	var mu sync.Mutex
	committed := map[string]time.Time{}
	// Steady load: one event per transaction, 100 per second.
	const paced = 300
	before := len(e.rcv.requests())
	var ids []string
	tick := time.NewTicker(10 * time.Millisecond)
	for i := 0; i < paced; i++ {
		<-tick.C
		env, _ := events.New("order.confirmed", e.account, network.Nile, map[string]any{"order_id": fmt.Sprintf("ord_p%d", i), "tier": "1h"})
		if err := pgx.BeginFunc(ctx, e.db.Pool, func(tx pgx.Tx) error { return outbox.Insert(ctx, tx, env) }); err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		committed[env.EventID] = time.Now()
		mu.Unlock()
		ids = append(ids, env.EventID)
	}
	tick.Stop()
	waitFor(b, 60*time.Second, "the paced events", func() bool { return len(e.rcv.requests()) >= before+paced })
	arrived := map[string]time.Time{}
	for _, r := range e.rcv.requests() {
		if _, ok := arrived[r.EventID]; !ok {
			arrived[r.EventID] = r.At
		}
	}
	var delays []float64
	for _, id := range ids {
		delays = append(delays, float64(arrived[id].Sub(committed[id]).Microseconds())/1000)
	}
	slices.Sort(delays)
	b.ReportMetric(delays[len(delays)/2], "p50-first-attempt-ms")
	b.ReportMetric(delays[len(delays)*99/100], "p99-first-attempt-ms")
}

// BenchmarkPlainPost is the reference: the same signed POSTs to the same kind of receiver
// from 12 goroutines (one per partition of the order topic), with no Kafka and no
// Postgres in between.
func BenchmarkPlainPost(b *testing.B) {
	rcv := newReceiver(b)
	secret := "whsec_bench"
	rcv.setSecret("/hook", secret)
	sender := &webhooks.Sender{Client: webhooks.Policy{AllowLoopback: true}.Client(0), UserAgent: webhooks.UserAgent(testBrand)}
	t := webhooks.Target{Endpoint: webhooks.Endpoint{URL: rcv.url("/hook")}, Secret: secret}
	env, _ := events.New("order.confirmed", "acc_bench", network.Nile, map[string]any{"order_id": "ord_1", "tier": "1h"})
	body, _ := json.Marshal(env)
	msg := webhooks.Message{EventID: env.EventID, EventType: env.Event, EventVersion: 1, Body: body}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		var wg sync.WaitGroup
		const workers = 12
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < benchBatch/workers; j++ {
					if s := sender.Send(context.Background(), t, msg, 1); !s.OK() {
						b.Errorf("post: %d %v", s.Status, s.Err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	b.ReportMetric(float64(b.N*(benchBatch/12)*12)/time.Since(start).Seconds(), "deliveries/s")
}
