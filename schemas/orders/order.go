// Package orders is the order domain: states and the transitions between them, the order
// record every endpoint and event shows, the payloads of the order events, and the pure
// arithmetic of delivery (lock periods, pro-rata refunds). It knows no SQL and no HTTP;
// infra/orderstore persists it, edge/orders.go serves it, processors/orderflow drives it.
package orders

import (
	"errors"
	"fmt"
	"math/bits"
	"time"

	"rental/schemas/events"
)

// Status is an order state (rental-api-v1 "States and transitions: Order").
type Status string

const (
	Created    Status = "created"    // row written, charge held, intent queued
	Paid       Status = "paid"       // the processor found the hold in place
	Allocating Status = "allocating" // supply reserved; transactions being signed and broadcast
	Delegated  Status = "delegated"  // every delegation broadcast; waiting for the chain
	Confirmed  Status = "confirmed"  // every hash in a confirmed block and the receiver's limit verified
	Active     Status = "active"     // the rental runs until expires_at
	Expired    Status = "expired"    // terminal: rental window ended, resource taken back
	Reclaimed  Status = "reclaimed"  // terminal: returned early on the customer's request
	Failed     Status = "failed"     // terminal: never delivered, charge reversed
	Refunded   Status = "refunded"   // terminal: delivered, then reversed by support
)

// Statuses lists every state in the spec's order.
var Statuses = []Status{Created, Paid, Allocating, Delegated, Confirmed, Active, Expired, Reclaimed, Failed, Refunded}

// ParseStatus accepts exactly the enum.
func ParseStatus(s string) (Status, bool) {
	for _, v := range Statuses {
		if string(v) == s {
			return v, true
		}
	}
	return "", false
}

// Terminal reports whether no transition leaves s (3009 for any change).
func (s Status) Terminal() bool {
	switch s {
	case Expired, Reclaimed, Failed, Refunded:
		return true
	}
	return false
}

// InFlight reports whether the order still waits for delivery: it counts against the
// account's concurrency limit (1101) and may still fail.
func (s Status) InFlight() bool {
	switch s {
	case Created, Paid, Allocating, Delegated:
		return true
	}
	return false
}

// Resource of an order.
type Resource string

const (
	Energy     Resource = "energy"
	Bandwidth  Resource = "bandwidth"
	Activation Resource = "activation"
)

// FilledByPool is Record.FilledBy for an order delivered from the service's own stake.
const FilledByPool = "own_pool"

// FilledByDeep is Record.FilledBy for an order (partly) rented from the on-chain deep
// reserve: its delegation is the contract's, which takes it back itself (reclaim is 3008).
const FilledByDeep = "deep_reserve"

// ActivationInfo is the activation part of the record and of order.confirmed.
type ActivationInfo struct {
	Performed bool    `json:"performed"`
	Hash      *string `json:"hash"`
	AmountSun int64   `json:"amount_sun"`
}

// Failure is the failure object of a failed order: a code of the error catalogue.
type Failure struct {
	Code    int    `json:"code"`
	Slug    string `json:"slug"`
	Message string `json:"message"`
}

// Record is the order record of the order endpoints (docs/orders.md): the union of the
// fields the order events carry, plus status and timestamps.
type Record struct {
	ID                string          `json:"id"`
	ClientOrderID     string          `json:"client_order_id"`
	BatchID           *string         `json:"batch_id"`
	SubscriptionID    *string         `json:"subscription_id"`
	Status            Status          `json:"status"`
	Resource          Resource        `json:"resource"`
	Amount            int64           `json:"amount"`
	DeliveredAmount   int64           `json:"delivered_amount"`
	Partial           bool            `json:"partial"`
	Tier              *string         `json:"tier"`
	DurationSeconds   *int64          `json:"duration_seconds"`
	Receiver          string          `json:"receiver"`
	UnitPriceSun      events.Centisun `json:"unit_price_sun"`
	TotalAmountSun    int64           `json:"total_amount_sun"`
	ChargedAmountSun  int64           `json:"charged_amount_sun"`
	RefundedAmountSun int64           `json:"refunded_amount_sun"`
	Activation        ActivationInfo  `json:"activation"`
	DelegateHashes    []string        `json:"delegate_hashes"`
	DelegatedAt       *events.Time    `json:"delegated_at"`
	ExpiresAt         *events.Time    `json:"expires_at"`
	Failure           *Failure        `json:"failure"`
	FilledBy          *string         `json:"filled_by"`
	CreatedAt         events.Time     `json:"created_at"`
	UpdatedAt         events.Time     `json:"updated_at"`

	// Transaction is the relayed transaction of an order made by POST /v1/transactions;
	// absent from every other order.
	Transaction *RelayedTransaction `json:"transaction,omitempty"`
}

// Event types of orders (named in the event catalogue, schemas/events).
const (
	EventConfirmed = events.EventOrderConfirmed
	EventFailed    = events.EventOrderFailed
	EventExpired   = events.EventOrderExpired
	EventReclaimed = events.EventOrderReclaimed
	EventRefunded  = events.EventOrderRefunded
)

// ConfirmedData is the data of order.confirmed.
type ConfirmedData struct {
	OrderID           string         `json:"order_id"`
	ClientOrderID     string         `json:"client_order_id"`
	BatchID           *string        `json:"batch_id"`
	SubscriptionID    *string        `json:"subscription_id"`
	Resource          Resource       `json:"resource"`
	Amount            int64          `json:"amount"`
	DeliveredAmount   int64          `json:"delivered_amount"`
	Partial           bool           `json:"partial"`
	Tier              *string        `json:"tier"`
	DurationSeconds   *int64         `json:"duration_seconds"`
	Receiver          string         `json:"receiver"`
	DelegateHash      *string        `json:"delegate_hash"`
	DelegateHashes    []string       `json:"delegate_hashes"`
	DelegatedAt       *events.Time   `json:"delegated_at"`
	ExpiresAt         *events.Time   `json:"expires_at"`
	TotalAmountSun    int64          `json:"total_amount_sun"`
	RefundedAmountSun int64          `json:"refunded_amount_sun"`
	Activation        ActivationInfo `json:"activation"`
	// Transaction is the relayed transaction of an order of POST /v1/transactions.
	Transaction *RelayedTransaction `json:"transaction,omitempty"`
}

// FailedData is the data of order.failed.
type FailedData struct {
	OrderID           string   `json:"order_id"`
	ClientOrderID     string   `json:"client_order_id"`
	Receiver          string   `json:"receiver"`
	Resource          Resource `json:"resource"`
	Amount            int64    `json:"amount"`
	Tier              *string  `json:"tier"`
	Failure           Failure  `json:"failure"`
	ChargedAmountSun  int64    `json:"charged_amount_sun"`
	RefundedAmountSun int64    `json:"refunded_amount_sun"`
	RefundComplete    bool     `json:"refund_complete"`
	// Transaction is the relayed transaction of an order of POST /v1/transactions.
	Transaction *RelayedTransaction `json:"transaction,omitempty"`
}

// EndedData is the data of order.reclaimed (ReclaimedAt set) and order.expired (ExpiredAt
// set): the spec gives order.expired the fields of order.reclaimed with expired_at in
// place of reclaimed_at. Tier is added (additive) so that webhook delivery can apply the
// 5m-tier retry cutoff to every order event.
type EndedData struct {
	OrderID           string       `json:"order_id"`
	ClientOrderID     string       `json:"client_order_id"`
	Receiver          string       `json:"receiver"`
	Resource          Resource     `json:"resource"`
	Amount            int64        `json:"amount"`
	Tier              *string      `json:"tier"`
	ReclaimHash       *string      `json:"reclaim_hash"`
	ReclaimedAt       *events.Time `json:"reclaimed_at,omitempty"`
	ExpiredAt         *events.Time `json:"expired_at,omitempty"`
	RefundedAmountSun int64        `json:"refunded_amount_sun"`
	// Transaction is the relayed transaction of an order of POST /v1/transactions.
	Transaction *RelayedTransaction `json:"transaction,omitempty"`
}

// RefundedData is the data of order.refunded.
type RefundedData struct {
	OrderID           string      `json:"order_id"`
	ClientOrderID     string      `json:"client_order_id"`
	Receiver          string      `json:"receiver"`
	Resource          Resource    `json:"resource"`
	Amount            int64       `json:"amount"`
	Tier              *string     `json:"tier"`
	DeliveredAmount   int64       `json:"delivered_amount"`
	Partial           bool        `json:"partial"`
	Reason            string      `json:"reason"`
	ChargedAmountSun  int64       `json:"charged_amount_sun"`
	RefundedAmountSun int64       `json:"refunded_amount_sun"`
	RefundComplete    bool        `json:"refund_complete"`
	RefundedAt        events.Time `json:"refunded_at"`
	// Transaction is the relayed transaction of an order of POST /v1/transactions.
	Transaction *RelayedTransaction `json:"transaction,omitempty"`
}

// Confirmed builds order.confirmed's data from the record.
func (r Record) Confirmed() ConfirmedData {
	d := ConfirmedData{
		OrderID: r.ID, ClientOrderID: r.ClientOrderID, BatchID: r.BatchID, SubscriptionID: r.SubscriptionID,
		Resource: r.Resource, Amount: r.Amount, DeliveredAmount: r.DeliveredAmount, Partial: r.Partial,
		Tier: r.Tier, DurationSeconds: r.DurationSeconds, Receiver: r.Receiver,
		DelegateHashes: nonNil(r.DelegateHashes), DelegatedAt: r.DelegatedAt, ExpiresAt: r.ExpiresAt,
		TotalAmountSun: r.TotalAmountSun, RefundedAmountSun: r.RefundedAmountSun, Activation: r.Activation,
		Transaction: r.Transaction,
	}
	if len(r.DelegateHashes) > 0 {
		h := r.DelegateHashes[0]
		d.DelegateHash = &h
	}
	return d
}

// FailedEvent builds order.failed's data.
func (r Record) FailedEvent(refundComplete bool) FailedData {
	f := Failure{}
	if r.Failure != nil {
		f = *r.Failure
	}
	return FailedData{
		OrderID: r.ID, ClientOrderID: r.ClientOrderID, Receiver: r.Receiver, Resource: r.Resource, Amount: r.Amount,
		Tier: r.Tier, Failure: f, ChargedAmountSun: r.ChargedAmountSun, RefundedAmountSun: r.RefundedAmountSun,
		RefundComplete: refundComplete, Transaction: r.Transaction,
	}
}

// Ended builds order.reclaimed's (reclaimed true) or order.expired's data.
func (r Record) Ended(reclaimed bool, hash *string, at time.Time) EndedData {
	d := EndedData{
		OrderID: r.ID, ClientOrderID: r.ClientOrderID, Receiver: r.Receiver, Resource: r.Resource, Amount: r.Amount,
		Tier: r.Tier, ReclaimHash: hash, RefundedAmountSun: r.RefundedAmountSun, Transaction: r.Transaction,
	}
	t := events.Time(at)
	if reclaimed {
		d.ReclaimedAt = &t
	} else {
		d.ExpiredAt = &t
	}
	return d
}

// RefundedEvent builds order.refunded's data.
func (r Record) RefundedEvent(reason string, at time.Time) RefundedData {
	return RefundedData{
		OrderID: r.ID, ClientOrderID: r.ClientOrderID, Receiver: r.Receiver, Resource: r.Resource, Amount: r.Amount,
		Tier: r.Tier, DeliveredAmount: r.DeliveredAmount, Partial: r.Partial, Reason: reason,
		ChargedAmountSun: r.ChargedAmountSun, RefundedAmountSun: r.RefundedAmountSun, RefundComplete: true,
		RefundedAt: events.Time(at), Transaction: r.Transaction,
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// RefundReasons are the reasons of order.refunded (Semantics 4).
var RefundReasons = []string{"incident_credit", "dispute", "partial_delivery", "support_adjustment"}

// ValidRefundReason reports whether reason is one of RefundReasons.
func ValidRefundReason(reason string) bool {
	for _, r := range RefundReasons {
		if r == reason {
			return true
		}
	}
	return false
}

// BlockSeconds is TRON's block interval; lock periods count blocks.
const BlockSeconds = 3

// LockPeriodBlocks is the delegation lock covering a rental of durationSeconds, capped by
// the network's maximum: the receiver keeps the resource for the whole tier, and the
// service can take it back right after.
func LockPeriodBlocks(durationSeconds, maxBlocks int64) (int64, error) {
	if durationSeconds <= 0 {
		return 0, errors.New("orders: rental duration must be positive")
	}
	b := (durationSeconds + BlockSeconds - 1) / BlockSeconds
	if b > maxBlocks {
		return 0, fmt.Errorf("orders: a %d s rental needs %d blocks of lock, over the network cap of %d", durationSeconds, b, maxBlocks)
	}
	return b, nil
}

// ProRataRefund is the refund of a partial delivery: the undelivered share of what was
// charged for the resource, rounded down (the customer never gets back more than the
// undelivered share; the activation fee is not refunded when activation was performed).
func ProRataRefund(resourceSun, amount, delivered int64) int64 {
	if amount <= 0 || delivered >= amount {
		return 0
	}
	if delivered <= 0 {
		return resourceSun
	}
	// resourceSun × (amount − delivered) / amount without overflow: both factors are far
	// below 2^31 in practice, but keep it exact for any int64 through 128-bit math.
	return mulDiv(resourceSun, amount-delivered, amount)
}

// mulDiv is a*b/d rounded down for 0 <= b <= d, d > 0: the result is at most a, so it
// cannot overflow.
func mulDiv(a, b, d int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	q, _ := bits.Div64(hi, lo, uint64(d))
	return int64(q)
}
