// Package quotes stores price quotes (rental-api-v1 "Quote") in Postgres.
//
// A quote locks a price for one account for Lifetime (120 s), not stock, and prices one
// order: Use records the order that used it (order_id, set once, in that order's
// transaction); the rest of the row is written once and never changed. Readers:
//
//   - GET /v1/quotes/{id} reads with Get: another account's quote and an unknown id are the
//     same ErrNotFound (no existence oracle).
//   - Order creation (issue 6) reads with GetValid / GetValidTx, which also refuse a quote
//     at or past its expires_at with an error that is both errors.Is(err, ErrExpired) and
//     the catalogue's 3005 quote_expired (details.quote_id, details.expired_at), so the
//     edge answers it as is.
//
// Prices are integers: UnitPriceCenti is the volume-weighted unit price rounded half up to
// hundredths of a SUN and PriceSunPerUnit is the unrounded price rounded up to a whole SUN.
// The table's CHECK constraints hold the invariants (total = energy + activation part;
// UnitPriceCenti <= 100 x PriceSunPerUnit <= UnitPriceCenti + 100, which is what the two
// roundings of one exact price always satisfy).
package quotes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"rental/schemas/apierr"
	"rental/schemas/events"
)

// Lifetime is how long a quote is valid after its creation (the spec's 120 seconds).
const Lifetime = 120 * time.Second

// IDPrefix prefixes quote ids: q_ followed by 24 hex characters.
const IDPrefix = "q"

var idPattern = regexp.MustCompile(`^q_[0-9a-f]{24}$`)

// ValidID reports whether s has the form of a quote id. Anything else can never be found,
// so callers may answer "not found" without a database round trip.
func ValidID(s string) bool { return idPattern.MatchString(s) }

// NewID returns a fresh quote id.
func NewID() string { return events.NewID(IDPrefix) }

// Fill is one level of the order-book walk a quote was priced from.
type Fill struct {
	PriceCenti int64  `json:"price_centisun"` // unit price of this fill, hundredths of a SUN
	Amount     int64  `json:"amount"`
	Class      string `json:"class"` // instant, market or deep
}

// Quote is one stored quote.
type Quote struct {
	ID        string
	AccountID string
	Resource  string // energy, bandwidth, activation
	Amount    int64  // resource units; 1 for activation
	Tier      string // "" for activation
	Receiver  string // "" when none was given

	PriceSunPerUnit   int64  // exact unit price rounded up to a whole SUN (legacy field)
	UnitPriceCenti    int64  // volume-weighted unit price rounded half up to 0.01 SUN
	Fills             []Fill // empty when one uniform price covered the amount
	EnergyAmountSun   int64  // the resource part (energy or bandwidth); 0 for activation
	ActivateAmountSun int64  // the activation fee, when the receiver needs activation
	TotalAmountSun    int64  // EnergyAmountSun + ActivateAmountSun

	CreatedAt time.Time
	ExpiresAt time.Time

	OrderID string // the order that used the quote; "" while unused (read, never created)
}

// ErrNotFound is returned for an unknown id and for another account's quote alike.
var ErrNotFound = errors.New("quotes: no such quote on this account")

// ErrExpired is matched (errors.Is) by the error GetValid returns for an expired quote.
var ErrExpired = errors.New("quotes: quote expired")

// ErrUsed is matched (errors.Is) by the error Use returns for a quote an order used already.
var ErrUsed = errors.New("quotes: quote already used")

// ErrInvalid is returned by Create for a quote that breaks the record's invariants; it is
// a programming error of the caller, never a client's.
var ErrInvalid = errors.New("quotes: invalid quote")

// DBTX is what the store runs statements on: the pool or a caller's transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Store keeps quotes in the quotes table.
type Store struct {
	pool *pgxpool.Pool
}

// New returns a store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Create stores q. q.ID, CreatedAt and ExpiresAt must be set (see Stamp).
func (s *Store) Create(ctx context.Context, q Quote) error { return CreateTx(ctx, s.pool, q) }

// Stamp sets q's id, creation time (truncated to the millisecond the API shows, so what is
// stored and what is answered are equal) and expiry (created + Lifetime).
func Stamp(q *Quote, now time.Time) {
	q.ID = NewID()
	q.CreatedAt = now.UTC().Truncate(time.Millisecond)
	q.ExpiresAt = q.CreatedAt.Add(Lifetime)
}

// CreateTx stores q on db (a transaction of the caller, such as the idempotency record's).
func CreateTx(ctx context.Context, db DBTX, q Quote) error {
	if err := check(q); err != nil {
		return err
	}
	fills := q.Fills
	if fills == nil {
		fills = []Fill{}
	}
	fj, err := json.Marshal(fills)
	if err != nil {
		return err
	}
	_, err = db.Exec(ctx, `INSERT INTO quotes (id, account_id, resource, amount, tier, receiver,
			price_sun_per_unit, unit_price_centisun, fills, energy_amount_sun, activate_amount_sun,
			total_amount_sun, created_at, expires_at)
		VALUES ($1, $2, $3, $4, NULLIF($5, ''), NULLIF($6, ''), $7, $8, $9, $10, $11, $12, $13, $14)`,
		q.ID, q.AccountID, q.Resource, q.Amount, q.Tier, q.Receiver,
		q.PriceSunPerUnit, q.UnitPriceCenti, fj, q.EnergyAmountSun, q.ActivateAmountSun,
		q.TotalAmountSun, q.CreatedAt, q.ExpiresAt)
	if err != nil {
		return fmt.Errorf("quotes: insert %s: %w", q.ID, err)
	}
	return nil
}

// check refuses a record the table would refuse, with a clearer message.
func check(q Quote) error {
	bad := func(msg string) error { return fmt.Errorf("%w: %s", ErrInvalid, msg) }
	switch {
	case !ValidID(q.ID):
		return bad("id " + q.ID)
	case q.AccountID == "":
		return bad("no account")
	case q.Amount <= 0:
		return bad("amount must be positive")
	case (q.Resource == "activation") != (q.Tier == ""):
		return bad("a tier is set exactly when the resource is not activation")
	case q.TotalAmountSun != q.EnergyAmountSun+q.ActivateAmountSun:
		return bad("total differs from its parts")
	case q.UnitPriceCenti < 0 || q.PriceSunPerUnit*100 < q.UnitPriceCenti || q.PriceSunPerUnit*100 > q.UnitPriceCenti+100:
		return bad("the whole-SUN price is not the exact price rounded up")
	case q.CreatedAt.IsZero() || !q.ExpiresAt.After(q.CreatedAt):
		return bad("created_at and expires_at")
	}
	return nil
}

const selectQuote = `SELECT id, account_id, resource, amount, coalesce(tier, ''), coalesce(receiver, ''),
	price_sun_per_unit, unit_price_centisun, fills, energy_amount_sun, activate_amount_sun,
	total_amount_sun, created_at, expires_at, coalesce(order_id, '') FROM quotes WHERE id = $1 AND account_id = $2`

// Get returns the account's quote id, expired or not; ErrNotFound when there is none.
func (s *Store) Get(ctx context.Context, accountID, id string) (Quote, error) {
	return GetTx(ctx, s.pool, accountID, id)
}

// GetTx is Get on db.
func GetTx(ctx context.Context, db DBTX, accountID, id string) (Quote, error) {
	return get(ctx, db, selectQuote, accountID, id)
}

func get(ctx context.Context, db DBTX, query, accountID, id string) (Quote, error) {
	if !ValidID(id) || accountID == "" {
		return Quote{}, ErrNotFound
	}
	var q Quote
	var fj []byte
	err := db.QueryRow(ctx, query, id, accountID).Scan(&q.ID, &q.AccountID, &q.Resource, &q.Amount,
		&q.Tier, &q.Receiver, &q.PriceSunPerUnit, &q.UnitPriceCenti, &fj, &q.EnergyAmountSun,
		&q.ActivateAmountSun, &q.TotalAmountSun, &q.CreatedAt, &q.ExpiresAt, &q.OrderID)
	if errors.Is(err, pgx.ErrNoRows) {
		return Quote{}, ErrNotFound
	}
	if err != nil {
		return Quote{}, fmt.Errorf("quotes: get %s: %w", id, err)
	}
	if err := json.Unmarshal(fj, &q.Fills); err != nil {
		return Quote{}, fmt.Errorf("quotes: fills of %s: %w", id, err)
	}
	q.CreatedAt, q.ExpiresAt = q.CreatedAt.UTC(), q.ExpiresAt.UTC()
	return q, nil
}

// GetValid returns the account's quote id when it is still valid at now. An expired quote
// (now at or after expires_at) gives an *apierr.Error of code 3005 quote_expired that also
// matches ErrExpired; an unknown id or another account's quote gives ErrNotFound.
func (s *Store) GetValid(ctx context.Context, accountID, id string, now time.Time) (Quote, error) {
	return GetValidTx(ctx, s.pool, accountID, id, now)
}

// GetValidTx is GetValid on db (the order-creation transaction).
func GetValidTx(ctx context.Context, db DBTX, accountID, id string, now time.Time) (Quote, error) {
	q, err := GetTx(ctx, db, accountID, id)
	if err != nil {
		return Quote{}, err
	}
	if !now.Before(q.ExpiresAt) {
		return Quote{}, Expired(q)
	}
	return q, nil
}

// Expired is the error for an expired quote: 3005 quote_expired with details.quote_id and
// details.expired_at, matching ErrExpired.
func Expired(q Quote) *apierr.Error {
	return apierr.QuoteExpired.Wrap(ErrExpired, "quote "+q.ID+" expired at "+events.FormatTime(q.ExpiresAt)+"; ask for a new quote").
		With("quote_id", q.ID).With("expired_at", events.FormatTime(q.ExpiresAt))
}

// GetForUseTx is GetTx for an order about to use the quote: it locks the quote's row in
// the order's transaction db until that commits or rolls back, so of two orders sent with
// one quote at once the second reads the first's OrderID once the first commits (and
// finds it unused when the first rolls back). The caller refuses a used quote (Used) and
// records its own order with QueueUse in the same transaction.
func GetForUseTx(ctx context.Context, db DBTX, accountID, id string) (Quote, error) {
	return get(ctx, db, selectQuote+" FOR UPDATE", accountID, id)
}

// Used is the refusal of a quote an order used already: 3023 quote_used with
// details.quote_id and details.order_id (the order that used it), matching ErrUsed.
func Used(q Quote) *apierr.Error {
	return apierr.QuoteUsed.Wrap(ErrUsed, "quote "+q.ID+" was used by order "+q.OrderID+"; a quote prices one order, ask for a new quote").
		WithField("quote_id").With("quote_id", q.ID).With("order_id", q.OrderID)
}

// QueueUse queues in b the statement recording that order orderID used quote q, read
// unused with GetForUseTx in the same transaction (the row is locked, so it matches).
func QueueUse(b *pgx.Batch, q Quote, orderID string) {
	b.Queue(`UPDATE quotes SET order_id = $3 WHERE id = $1 AND account_id = $2 AND order_id IS NULL`, q.ID, q.AccountID, orderID)
}

// PurgeExpired deletes quotes that expired before `before` and returns how many. Orders
// keep their own copy of the price, so an old quote is not needed once it cannot be used;
// run it from a maintenance job with a margin (e.g. now - 24 h).
func (s *Store) PurgeExpired(ctx context.Context, before time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM quotes WHERE expires_at < $1`, before)
	if err != nil {
		return 0, fmt.Errorf("quotes: purge: %w", err)
	}
	return tag.RowsAffected(), nil
}
