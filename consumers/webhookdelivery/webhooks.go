// Package webhooks is the delivery consumer: it reads the customer event topics and POSTs
// each event, signed, to the account's webhook endpoint, retrying on the spec's schedule
// through one delay topic per step, failing over from the primary to the backup endpoint
// and dead-lettering what no endpoint took. docs/webhooks.md describes the contract.
//
// State lives in Postgres (infra/webhooks): every delivery sits in the queue table until it
// is delivered or dead, and the retry topics carry only wake-ups naming the attempt that is
// due. The Kafka handlers never make an attempt: they queue the event (or take the
// wake-up), hand the ordering key to the dispatcher (dispatch.go: a bounded pool of drives,
// one per key at a time, a share per account) and return, so one slow or dead endpoint
// holds up only its own account's keys, never a partition. Every step writes Kafka before
// it commits the Postgres state that expects it; an offset is committed once what it
// caused is in the queue table, and a drive that dies with the process is taken up again
// by the sweep of overdue queue heads, so a crash at any point leads to the step being
// redone (a duplicate send, which receivers dedupe by event id) and never to a delivery
// that nobody drives.
//
// Ordering: the events of one order are delivered one at a time in the order they were
// read (the order topic is keyed by order id, so that is the order they happened). An
// event whose order has an earlier event still being retried waits in the queue behind it
// and is sent when that one is delivered or dead; a dead event does not hold the order's
// later events back for more than its schedule. Events of other topics are not ordered by
// the spec and never wait for each other.
package webhookdelivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/kafka"
	"rental/infra/metrics"
	"rental/infra/webhooks"
	"rental/schemas/topics"
)

// Schedule is the spec's retry schedule: the delay before attempts 2 to 10.
var Schedule = []time.Duration{
	15 * time.Second, 30 * time.Second, 3 * time.Minute, 10 * time.Minute, 20 * time.Minute,
	30 * time.Minute, time.Hour, 3 * time.Hour, 6 * time.Hour,
}

// ShortTierAttempts is the number of attempts per endpoint for events of 5m-tier orders.
const ShortTierAttempts = 4

// EventTopics are the topics deliveries are read from.
var EventTopics = []topics.Topic{topics.OrderEvents, topics.AccountEvents, topics.SubscriptionEvents, topics.BatchEvents}

// Options configure a Deliverer.
type Options struct {
	Brokers []string        // required
	Store   *webhooks.Store // required
	Policy  webhooks.Policy // targets allowed (WEBHOOK_ALLOW_LOOPBACK)
	Brand   string          // User-Agent <brand>-webhook/1; required
	Group   string          // consumer group; default "webhooks" (the retry consumer adds ".retry")
	// Delays are the waits before attempts 2..len+1 (WEBHOOK_RETRY_DELAYS; tests compress
	// them). Default Schedule; at most len(topics.WebhookRetry) steps.
	Delays []time.Duration
	// MaxConnsPerHost bounds connections to one endpoint (default 64).
	MaxConnsPerHost int
	// MaxDrives bounds the ordering keys driven (attempts in flight) at once by this
	// replica (default 256); MaxDrivesPerAccount bounds those of one account (default 32),
	// so one account's slow endpoint cannot occupy the whole pool.
	MaxDrives           int
	MaxDrivesPerAccount int
	// SweepEvery is how often the queue is searched for deliveries whose attempt is overdue
	// (by twice that) and that nobody drives: those of a replica that died (default 1s).
	SweepEvery time.Duration
	// StatsEvery is how often the queue's depth and oldest due age are read for
	// rental_webhook_queue_* (default 5s; one query per replica).
	StatsEvery time.Duration
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// ClientOpts are appended to every Kafka client's options (tests shorten timeouts).
	ClientOpts []kgo.Opt
	Now        func() time.Time
}

// Deliverer is the delivery consumer. Run it; it scales by adding replicas (one consumer
// group for the event topics, one for the retry topics).
type Deliverer struct {
	o      Options
	log    *slog.Logger
	store  *webhooks.Store
	sender *webhooks.Sender
	prod   *kgo.Client
	main   *kafka.Runner
	retry  *delayConsumer
	dead   *kafka.DeadLetters // unreadable retry records
	pool   *dispatcher
	enq    *enqueuer

	attempts   *prometheus.CounterVec
	latency    prometheus.Histogram
	firstDelay prometheus.Histogram
	depth      prometheus.Gauge
	oldestDue  prometheus.Gauge
}

// lease bounds one attempt: the 10 s delivery bound plus room for the database writes.
const lease = webhooks.Timeout + 20*time.Second

// New validates the options.
func New(o Options) (*Deliverer, error) {
	if len(o.Brokers) == 0 || o.Store == nil || o.Brand == "" {
		return nil, errors.New("webhooks: Brokers, Store and Brand are required")
	}
	if o.Delays == nil {
		o.Delays = Schedule
	}
	if len(o.Delays) > len(topics.WebhookRetry) {
		return nil, fmt.Errorf("webhooks: %d retry delays, at most %d (one topic per step)", len(o.Delays), len(topics.WebhookRetry))
	}
	if o.Group == "" {
		o.Group = "webhooks"
	}
	if o.MaxDrives <= 0 {
		o.MaxDrives = 256
	}
	if o.MaxDrivesPerAccount <= 0 {
		o.MaxDrivesPerAccount = 32
	}
	o.MaxDrivesPerAccount = min(o.MaxDrivesPerAccount, o.MaxDrives)
	if o.SweepEvery <= 0 {
		o.SweepEvery = time.Second
	}
	if o.StatsEvery <= 0 {
		o.StatsEvery = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	// A replica that dies without leaving the group holds its partitions until its session
	// times out; deliveries wait that long. 10 s instead of franz-go's 45 s (options given
	// by the caller still win).
	o.ClientOpts = append([]kgo.Opt{kgo.SessionTimeout(10 * time.Second)}, o.ClientOpts...)
	d := &Deliverer{o: o, log: o.Logger.With("stage", "webhooks"), store: o.Store}
	d.pool = newDispatcher(o.MaxDrives, o.MaxDrivesPerAccount, maxWaiting, d.log, d.driveKey)
	d.enq = newEnqueuer(o.Store)
	d.sender = &webhooks.Sender{Client: o.Policy.Client(o.MaxConnsPerHost), UserAgent: webhooks.UserAgent(o.Brand), Now: o.Now}
	d.attempts = metrics.Register(o.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rental_webhook_attempts_total",
		Help: "Webhook delivery attempts by outcome (succeeded, failed), what followed (done, retry, failover, dead) and the endpoint's role (primary, backup).",
	}, []string{"status", "next", "role"}))
	// Every outcome starts at 0, so the first dead letter of a process is an increase an
	// alert sees (a series born at 1 has none) and the dashboards show 0, not no data.
	for _, role := range []string{webhooks.RolePrimary, webhooks.RoleBackup} {
		for _, o := range [][2]string{{"succeeded", "done"}, {"failed", "retry"}, {"failed", "failover"}, {"failed", "dead"}} {
			if o[1] != "failover" || role == webhooks.RolePrimary {
				d.attempts.WithLabelValues(o[0], o[1], role)
			}
		}
	}
	d.latency = metrics.Register(o.Registerer, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "rental_webhook_attempt_seconds",
		Help:    "Duration of one webhook POST, answer included.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
	}))
	d.firstDelay = metrics.Register(o.Registerer, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "rental_webhook_first_attempt_delay_seconds",
		Help:    "From an event's created_at to the start of its first delivery attempt.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
	}))
	d.depth = metrics.Register(o.Registerer, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rental_webhook_queue_depth",
		Help: "Deliveries in the webhook queue (every replica reads the same table; take max).",
	}))
	d.oldestDue = metrics.Register(o.Registerer, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "rental_webhook_queue_oldest_due_age_seconds",
		Help: "How long the longest-waiting due delivery has been due (0 when none is due).",
	}))
	names := make([]string, len(EventTopics))
	for i, t := range EventTopics {
		names[i] = t.Name
	}
	var err error
	d.main, err = kafka.NewRunner(kafka.RunnerOptions{
		Brokers: o.Brokers, Group: o.Group, Topics: names, Handler: d.handleEvent,
		Logger: o.Logger, Registerer: o.Registerer, ClientOpts: o.ClientOpts,
	})
	if err != nil {
		return nil, err
	}
	retryNames := make([]string, len(o.Delays))
	for i := range o.Delays {
		retryNames[i] = topics.WebhookRetry[i].Name
	}
	d.dead = kafka.NewDeadLetters(o.Group+".retry", o.Registerer)
	d.retry = &delayConsumer{
		brokers: o.Brokers, group: o.Group + ".retry", topics: retryNames,
		due: wakeupDue, handle: d.handleWakeup, now: o.Now, log: d.log, extra: o.ClientOpts,
		commitEvery: time.Second, retryMin: 100 * time.Millisecond, retryMax: 5 * time.Second, buffer: 64,
	}
	return d, nil
}

// Run consumes until ctx ends.
func (d *Deliverer) Run(ctx context.Context) error {
	prod, err := kafka.NewClient(d.o.Brokers, d.o.ClientOpts...)
	if err != nil {
		return err
	}
	defer prod.Close()
	d.prod = prod
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d.pool.start(ctx)
	defer d.pool.wait() // before the producer closes: drives produce
	d.enq.run(ctx)
	errc := make(chan error, 2)
	go func() { errc <- d.main.Run(ctx) }()
	go func() { errc <- d.retry.Run(ctx) }()
	go d.pruneHistory(ctx)
	go d.sweep(ctx)
	go metrics.Sample(ctx, d.o.StatsEvery, d.log, "the webhook queue", d.readStats)
	d.log.Info("webhook deliverer up", "retry_steps", len(d.o.Delays))
	err = <-errc
	cancel()
	if err2 := <-errc; err == nil {
		err = err2
	}
	return err
}

func (d *Deliverer) readStats(ctx context.Context) error {
	st, err := d.store.Stats(ctx)
	if err != nil {
		return err
	}
	d.depth.Set(float64(st.Depth))
	d.oldestDue.Set(st.OldestDue.Seconds())
	return nil
}

// maxWaiting is how many keys of one account may wait for the account's share of the
// dispatcher; beyond that they stay in the queue table until the sweep finds them.
const maxWaiting = 10_000

// sweep hands the dispatcher, every SweepEvery, the queue heads whose attempt was due more
// than two periods ago and that no lease covers. At-least-once rests on it: the handlers
// commit their offsets as soon as the work is in the queue table, so a drive that dies
// with the process (or a key the dispatcher dropped) is found only here. A head found
// while it is being driven here already is merged into that drive (and then skipped as
// stale or busy).
func (d *Deliverer) sweep(ctx context.Context) {
	t := time.NewTicker(d.o.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		due, err := d.store.Overdue(ctx, 2*d.o.SweepEvery, d.o.MaxDrivesPerAccount, 4*d.o.MaxDrives)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("searching the webhook queue for overdue deliveries failed", "err", err)
			}
			continue
		}
		for _, h := range due {
			d.pool.submit(h.AccountID, h.OKey, &step{EventID: h.EventID, Role: h.Role, N: h.Attempt + 1})
		}
	}
}

// pruneHistory keeps delivery history bounded: every hour, rows older than
// webhooks.HistoryRetention go. Several replicas may prune at once; the deletes are
// idempotent.
func (d *Deliverer) pruneHistory(ctx context.Context) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := d.store.PruneHistory(ctx, webhooks.HistoryRetention); err != nil && ctx.Err() == nil {
			d.log.Warn("pruning webhook delivery history failed", "err", err)
		} else if n > 0 {
			d.log.Info("webhook delivery history pruned", "rows", n)
		}
	}
}

// envelope is the part of an event the deliverer reads; the body is sent unchanged.
type envelope struct {
	Event        string `json:"event"`
	EventID      string `json:"event_id"`
	EventVersion int    `json:"event_version"`
	CreatedAt    string `json:"created_at"`
	AccountID    string `json:"account_id"`
	Test         bool   `json:"test"`
	Data         struct {
		Tier string `json:"tier"`
	} `json:"data"`
}

// handleEvent is the handler of the event topics.
func (d *Deliverer) handleEvent(ctx context.Context, rec *kgo.Record) error {
	var env envelope
	if err := json.Unmarshal(rec.Value, &env); err != nil || env.EventID == "" || env.AccountID == "" || env.Event == "" {
		// It can never be delivered: the runner dead-letters it, then moves on.
		return kafka.Unprocessable(fmt.Errorf("event without a readable envelope (event_id, account_id, event): %v", err))
	}
	okey := env.EventID // events outside orders are not ordered among themselves
	maxAttempts := len(d.o.Delays) + 1
	isOrder := rec.Topic == topics.OrderEvents.Name
	if isOrder {
		okey = "order:" + string(rec.Key)
	}
	if isOrder {
		tier := env.Data.Tier
		if tier == "" {
			var err error
			if tier, err = d.store.OrderTier(ctx, string(rec.Key)); err != nil {
				return err
			}
		}
		if tier == "5m" {
			maxAttempts = min(maxAttempts, ShortTierAttempts)
		}
	}
	// Once queued the delivery is durable, so the offset may be committed now; the
	// attempts are the dispatcher's, off this partition's worker. When a drive is free for
	// the key at once, the first attempt is claimed by the same statement and handed to
	// it. No endpoint wanting the event queues nothing.
	j := d.pool.reserve(env.AccountID, okey)
	q, err := d.enq.enqueue(ctx, webhooks.NewDelivery{Claim: j != nil, Item: webhooks.Item{AccountID: env.AccountID,
		OKey: okey, EventID: env.EventID, EventType: env.Event, Body: rec.Value, MaxAttempts: maxAttempts}})
	switch {
	case j == nil:
		if err == nil && q.Role != "" {
			d.pool.submit(env.AccountID, okey, nil)
		}
	case err == nil && q.Claimed && q.Err != nil:
		d.pool.launch(j, func(context.Context) error {
			d.release(q.Item.EventID, 1)
			return q.Err
		})
	case err == nil && q.Claimed:
		d.pool.launch(j, func(ctx context.Context) error { return d.drive(ctx, env.AccountID, okey, nil, &q) })
	case err == nil && q.Role != "":
		d.pool.launch(j, nil) // queued behind others of its key: drive the key
	default:
		d.pool.launch(j, func(context.Context) error { return nil }) // nothing for it to do
	}
	return err
}

// usable reports whether t may receive eventType now.
func usable(t webhooks.Target, ok bool, eventType string) bool {
	return ok && t.IsActive && t.Wants(eventType)
}

// firstRole is the role a new delivery starts on: the primary, or the backup when the
// primary is missing, inactive or not subscribed.
func firstRole(targets map[string]webhooks.Target, eventType string) string {
	for _, r := range []string{webhooks.RolePrimary, webhooks.RoleBackup} {
		t, ok := targets[r]
		if usable(t, ok, eventType) {
			return r
		}
	}
	return ""
}

// message is what an attempt of it sends, and the event's created_at.
func message(it webhooks.Item) (webhooks.Message, string) {
	var env envelope
	_ = json.Unmarshal(it.Body, &env)
	v := env.EventVersion
	if v == 0 {
		v = 1
	}
	return webhooks.Message{EventID: it.EventID, EventType: it.EventType, EventVersion: v, Body: it.Body}, env.CreatedAt
}

// step names an attempt to make: attempt N of EventID on Role.
type step struct {
	EventID string `json:"event_id"`
	Role    string `json:"role"`
	N       int    `json:"attempt"`
}

var errBehind = errors.New("webhooks: wake-up ahead of its delivery's committed state")

// driveKey is the dispatcher's work for a key: the due wake-up steps in turn, or the head.
func (d *Deliverer) driveKey(ctx context.Context, accountID, okey string, steps []step) error {
	if len(steps) == 0 {
		return d.drive(ctx, accountID, okey, nil, nil)
	}
	for i := range steps {
		if err := d.drive(ctx, accountID, okey, &steps[i], nil); err != nil {
			return err
		}
	}
	return nil
}

// drive makes the attempts that are due now for the key: the claimed first attempt or the
// given step first (if any), then, whenever a delivery finishes, the next delivery of the
// key. It returns when the key is empty, its head waits for a wake-up, or another worker
// holds the attempt (whose end continues the key; if that worker dies, its lease runs out
// and the sweep takes the head up).
func (d *Deliverer) drive(ctx context.Context, accountID, okey string, s *step, claimed *webhooks.Queued) error {
	for {
		var it webhooks.Item
		var targets map[string]webhooks.Target
		if claimed != nil {
			it, targets, claimed = claimed.Item, claimed.Targets, nil
			s = &step{EventID: it.EventID, Role: it.Role, N: 1}
		} else if s == nil {
			// The head's first attempt on its role, if that is what the key needs next; a head
			// that waits for its wake-up, or whose attempt another worker makes, is left alone.
			var ok bool
			var err error
			if it, targets, ok, err = d.store.ClaimHead(ctx, accountID, okey, lease); err != nil || !ok {
				return err
			}
			s = &step{EventID: it.EventID, Role: it.Role, N: 1}
		} else {
			var res webhooks.ClaimResult
			var err error
			if it, targets, res, err = d.store.Claim(ctx, s.EventID, s.Role, s.N, lease); err != nil {
				return err
			}
			switch res {
			case webhooks.Stale:
				// Says nothing about the head: after a failover the head is the same event on
				// the backup at attempt 0, which nothing else would drive.
				s = nil
				continue
			case webhooks.Busy:
				return nil
			case webhooks.Behind:
				return errBehind
			}
		}
		t, ok := targets[s.Role]
		var sent webhooks.Sent
		if usable(t, ok, it.EventType) {
			m, created := message(it)
			if s.N == 1 && it.Role == firstRole(targets, it.EventType) {
				d.observeFirst(created)
			}
			sent = d.sender.Send(ctx, t, m, s.N)
			if ctx.Err() != nil {
				d.release(it.EventID, s.N)
				return ctx.Err()
			}
		} else {
			sent = webhooks.Sent{Err: errors.New("no active endpoint subscribed to this event holds role " + s.Role)}
		}
		var idle bool
		var err error
		if s, idle, err = d.outcome(ctx, it, targets, s.Role, s.N, sent); err != nil || idle {
			return err
		}
		// s is nil when the delivery is done, dead, or waiting for a wake-up: the head
		// decides what follows.
	}
}

// observeFirst records the delay from the event's creation (created_at) to its first
// attempt.
func (d *Deliverer) observeFirst(createdAt string) {
	if t, err := time.Parse(time.RFC3339Nano, createdAt); err == nil {
		d.firstDelay.Observe(d.o.Now().Sub(t).Seconds())
	}
}

// release gives up an attempt abandoned at shutdown, so the replica that takes over does
// not wait for its lease to expire.
func (d *Deliverer) release(eventID string, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := d.store.Release(ctx, eventID, n); err != nil {
		d.log.Warn("releasing an abandoned attempt failed; its lease runs out by itself", "event_id", eventID, "err", err)
	}
}

// outcome records attempt n of it on role and decides what follows. It returns the step
// to make at once (the first attempt on the backup after a failover), or nil; idle when
// the delivery left the queue and nothing of its key was queued behind it (a later event
// of the key submits the key anew).
func (d *Deliverer) outcome(ctx context.Context, it webhooks.Item, targets map[string]webhooks.Target, role string, n int, sent webhooks.Sent) (next *step, idle bool, err error) {
	t, ok := targets[role]
	sendable := usable(t, ok, it.EventType)
	switch {
	case sent.OK():
		more, err := d.store.Finish(ctx, d.attempt(it, t, role, n, sent, "done", nil))
		return nil, !more, err
	case sendable && n < it.MaxAttempts:
		due := d.o.Now().Add(d.o.Delays[n-1])
		// The wake-up first: the state that expects it is committed only once it exists.
		w := wakeup{step: step{EventID: it.EventID, Role: role, N: n + 1}, AccountID: it.AccountID, OKey: it.OKey, DueMS: due.UnixMilli()}
		if err := d.produce(ctx, topics.WebhookRetry[n-1], it.OKey, w.value(), w.headers()); err != nil {
			return nil, false, err
		}
		return nil, false, d.store.Retry(ctx, d.attempt(it, t, role, n, sent, "retry", &due), due)
	case role == webhooks.RolePrimary && usable(targets[webhooks.RoleBackup], hasRole(targets, webhooks.RoleBackup), it.EventType):
		if err := d.store.Failover(ctx, d.attempt(it, t, role, n, sent, "failover", nil), webhooks.RoleBackup); err != nil {
			return nil, false, err
		}
		return &step{EventID: it.EventID, Role: webhooks.RoleBackup, N: 1}, false, nil
	default:
		if err := d.deadLetter(ctx, it.OKey, it.Body, map[string]string{
			"event_id": it.EventID, "account_id": it.AccountID, "role": role, "attempts": strconv.Itoa(n), "reason": "exhausted",
		}); err != nil {
			return nil, false, err
		}
		more, err := d.store.Finish(ctx, d.attempt(it, t, role, n, sent, "dead", nil))
		return nil, !more, err
	}
}

func hasRole(targets map[string]webhooks.Target, role string) bool {
	_, ok := targets[role]
	return ok
}

// attempt builds the history row of an attempt and counts it.
func (d *Deliverer) attempt(it webhooks.Item, t webhooks.Target, role string, n int, sent webhooks.Sent, next string, due *time.Time) webhooks.Attempt {
	status := "failed"
	if sent.OK() {
		status = "succeeded"
	}
	d.attempts.WithLabelValues(status, next, role).Inc()
	if sent.DeliveryID != "" {
		d.latency.Observe(sent.Latency.Seconds())
	}
	a := webhooks.Attempt{
		DeliveryID: sent.DeliveryID, EndpointID: t.ID, AccountID: it.AccountID, EventID: it.EventID,
		EventType: it.EventType, Role: role, Number: n, Succeeded: sent.OK(), Latency: sent.Latency,
		Next: next, NextAttemptAt: due,
	}
	if sent.DeliveryID == "" {
		a.EndpointID = "" // nothing was sent: no history row
	}
	if sent.Status != 0 {
		st := sent.Status
		a.HTTPStatus = &st
	}
	if sent.Err != nil {
		msg := errorText(sent.Err)
		a.Error = &msg
	} else if !sent.OK() {
		msg := "non-2xx answer"
		a.Error = &msg
	}
	if !sent.OK() {
		d.log.Debug("webhook attempt failed", "event_id", it.EventID, "role", role, "attempt", n,
			"status", sent.Status, "next", next, "err", *a.Error)
	}
	return a
}

// errorText is what the history says about a failed attempt: the kind of failure, not
// the raw error (which may quote internal addresses).
func errorText(err error) string {
	switch {
	case webhooks.IsBlocked(err):
		return "target address not allowed"
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return "timeout after 10 s"
	}
	return "connection failed"
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

func (d *Deliverer) deadLetter(ctx context.Context, key string, value []byte, headers map[string]string) error {
	if key == "" {
		key = "unkeyed"
	}
	return d.produce(ctx, topics.WebhookDead, key, value, headers)
}

// produce writes one record and waits for the broker's acknowledgement.
func (d *Deliverer) produce(ctx context.Context, t topics.Topic, key string, value []byte, headers map[string]string) error {
	r := &kgo.Record{Topic: t.Name, Key: []byte(key), Value: value}
	for k, v := range headers {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	if err := d.prod.ProduceSync(ctx, r).FirstErr(); err != nil {
		return fmt.Errorf("webhooks: produce to %s: %w", t.Name, err)
	}
	return nil
}

// wakeup is a retry record: attempt N of a delivery is due at DueMS.
type wakeup struct {
	step
	AccountID string `json:"account_id"`
	OKey      string `json:"okey"`
	DueMS     int64  `json:"due_ms"`
}

const headerDue = "due_ms"

func (w wakeup) value() []byte {
	b, _ := json.Marshal(w)
	return b
}

func (w wakeup) headers() map[string]string {
	return map[string]string{headerDue: strconv.FormatInt(w.DueMS, 10), "event_id": w.EventID}
}

// wakeupDue reads a retry record's due time; an unreadable one is due at once (and then
// refused by its handler).
func wakeupDue(r *kgo.Record) time.Time {
	for _, h := range r.Headers {
		if h.Key == headerDue {
			if ms, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil {
				return time.UnixMilli(ms)
			}
		}
	}
	return time.Time{}
}

// handleWakeup is the handler of the retry topics: the attempt is due. It hands the step
// to the dispatcher and returns, so the partition moves on. The delivery's state (attempt
// n-1 made, due_at) was committed before this record could be due, or its writer holds a
// lease and the step is tried again; if this process dies before the step is made, the
// sweep finds the overdue head.
func (d *Deliverer) handleWakeup(ctx context.Context, r *kgo.Record) error {
	var w wakeup
	if err := json.Unmarshal(r.Value, &w); err != nil || w.EventID == "" || w.AccountID == "" {
		// It can never be handled: dead-letter it, and move on only once it is stored.
		cause := fmt.Errorf("unreadable retry record: %v", err)
		if err := d.dead.Write(ctx, d.prod, r, cause); err != nil {
			return err
		}
		d.log.Error("unreadable retry record dead-lettered", "topic", r.Topic, "offset", r.Offset, "err", cause)
		return nil
	}
	d.pool.submit(w.AccountID, w.OKey, &w.step)
	return nil
}
