// Package batches is the batch domain (docs/batches.md): receiver states and outcomes, the
// batch's final status, the batch record the endpoints answer and the data of
// batch.completed. It knows no SQL and no HTTP; infra/batchstore persists it, edge/batches.go
// serves it, processors/batchflow drives it.
package batches

import (
	"rental/schemas/events"
	"rental/schemas/orders"
)

// MaxReceivers is the spec's batch size limit; an account's max_batch_receivers may be lower.
const MaxReceivers = 100

// EventCompleted is the one event of a batch (named in the event catalogue, schemas/events).
const EventCompleted = events.EventBatchCompleted

// Status is a batch's status. The spec names partial; the other values are this service's
// (docs/batches.md "Status").
type Status string

const (
	Processing Status = "processing" // receivers are still being placed or delivered
	Completed  Status = "completed"  // every receiver completed
	Partial    Status = "partial"    // some receivers delivered, not all completed
	Failed     Status = "failed"     // nothing delivered (refused, failed, or cancelled alongside)
	Cancelled  Status = "cancelled"  // every receiver cancelled before pick-up
)

// State is a receiver's state.
type State string

const (
	Pending           State = "pending"            // waiting to be picked up
	Placed            State = "placed"             // order placed and charged, outcome still open
	StateCompleted    State = "completed"          // order confirmed in full
	StatePartial      State = "partial"            // order confirmed with partial = true
	StateFailed       State = "failed"             // refused at placement, or the order failed
	InsufficientFunds State = "insufficient_funds" // refused at placement with 4001 / 4002
	StateCancelled    State = "cancelled"          // cancelled before pick-up
)

// Final reports whether s is a receiver's final outcome.
func (s State) Final() bool { return s != Pending && s != Placed }

// Summary holds the spec's receiver outcome counters.
type Summary struct {
	Total             int `json:"total"`
	Completed         int `json:"completed"`
	Partial           int `json:"partial"`
	Failed            int `json:"failed"`
	InsufficientFunds int `json:"insufficient_funds"`
	Cancelled         int `json:"cancelled"`
}

// Count adds one receiver in state s to the counters (pending and placed count only in
// Total).
func (s *Summary) Count(st State) {
	s.Total++
	switch st {
	case StateCompleted:
		s.Completed++
	case StatePartial:
		s.Partial++
	case StateFailed:
		s.Failed++
	case InsufficientFunds:
		s.InsufficientFunds++
	case StateCancelled:
		s.Cancelled++
	}
}

// Open is how many receivers have no final outcome yet.
func (s Summary) Open() int {
	return s.Total - s.Completed - s.Partial - s.Failed - s.InsufficientFunds - s.Cancelled
}

// FinalStatus is the batch's status once every receiver is final (Open() == 0):
//
//	completed  every receiver completed
//	cancelled  every receiver cancelled
//	failed     no receiver delivered (failed, insufficient_funds, and cancelled ones)
//	partial    otherwise: some delivered (completed or partial), not all completed
//
// A batch with open receivers is processing.
func (s Summary) FinalStatus() Status {
	switch {
	case s.Open() > 0:
		return Processing
	case s.Completed == s.Total:
		return Completed
	case s.Cancelled == s.Total:
		return Cancelled
	case s.Completed+s.Partial == 0:
		return Failed
	}
	return Partial
}

// OrderOutcome is the final state a placed receiver takes from its order, and whether the
// order has one yet. A delivered order (confirmed, and whatever follows: active, expired,
// reclaimed, refunded) counts as completed, or partial when its partial flag is set; a
// failed order is failed. What happens to a delivered order later does not change the
// batch.
func OrderOutcome(status orders.Status, partial bool) (State, bool) {
	switch status {
	case orders.Confirmed, orders.Active, orders.Expired, orders.Reclaimed, orders.Refunded:
		if partial {
			return StatePartial, true
		}
		return StateCompleted, true
	case orders.Failed:
		return StateFailed, true
	}
	return "", false
}

// ReceiverError is why a receiver was refused at placement: a catalogue error as the
// envelope would show it (details keep e.g. required_sun and available_sun of 4001).
type ReceiverError struct {
	Code    int            `json:"code"`
	Slug    string         `json:"slug"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

// Receiver is one receiver in the batch record.
type Receiver struct {
	Index            int            `json:"index"`
	Receiver         string         `json:"receiver"`
	Amount           int64          `json:"amount"`
	Activate         bool           `json:"activate"`
	Status           State          `json:"status"`
	OrderID          *string        `json:"order_id"`
	ChargedAmountSun int64          `json:"charged_amount_sun"`
	Error            *ReceiverError `json:"error"`
	FinishedAt       *events.Time   `json:"finished_at"`
}

// Record is the batch record of the batch endpoints (docs/batches.md "Record").
type Record struct {
	ID               string       `json:"id"`
	ClientBatchID    string       `json:"client_batch_id"`
	Status           Status       `json:"status"`
	Resource         string       `json:"resource"`
	Tier             string       `json:"tier"`
	Amount           *int64       `json:"amount"`
	Activate         bool         `json:"activate"`
	MaxPriceSun      *int64       `json:"max_price_sun"`
	Summary          Summary      `json:"summary"`
	ChargedAmountSun int64        `json:"charged_amount_sun"`
	Receivers        []Receiver   `json:"receivers"`
	CreatedAt        events.Time  `json:"created_at"`
	UpdatedAt        events.Time  `json:"updated_at"`
	FinishedAt       *events.Time `json:"finished_at"`
}

// CompletedData is the data of batch.completed: exactly the spec's fields.
type CompletedData struct {
	BatchID          string      `json:"batch_id"`
	ClientBatchID    string      `json:"client_batch_id"`
	Status           Status      `json:"status"`
	Summary          Summary     `json:"summary"`
	ChargedAmountSun int64       `json:"charged_amount_sun"`
	FinishedAt       events.Time `json:"finished_at"`
}
