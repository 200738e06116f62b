// Package idempotency makes a mutating request happen at most once per key, in Postgres.
//
// Semantics (rental-api-v1 "Idempotency"): a record lives 24 hours; a repeat with the same
// request returns the stored response (the edge answers it with HTTP 200); the same key
// with a different request is 3010 idempotency_conflict with details.original_id; a repeat
// while the first is still running is 3015 request_in_progress with Retry-After. After the
// retention the key starts a new operation.
//
// Design: the record is written in the SAME transaction as the work it guards (Do, or
// ClaimTx + CompleteTx inside a caller's own transaction, as order creation does with
// client_order_id). A committed record therefore always holds its response, and a failed
// operation leaves no record, so a retry runs it again. A concurrent duplicate's insert
// waits on the primary key until the first transaction ends; it waits at most Wait (lock
// timeout) and then answers 3015. Nothing can be left "in progress" by a crash: an
// aborted transaction takes its record with it.
package idempotency

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"rental/schemas/apierr"
)

// Namespaces keep keys of different origins apart.
const (
	NamespaceHeader = "header" // the Idempotency-Key header, any endpoint
	NamespaceOrder  = "order"  // client_order_id of POST /v1/orders
	NamespaceBatch  = "batch"  // client_batch_id of POST /v1/batches
)

// Key identifies a record.
type Key struct {
	AccountID string
	Namespace string
	Key       string
}

// Response is what a completed operation answered. Body is what is replayed to a repeat;
// it may differ from what the first caller got (an API key secret is shown only once).
type Response struct {
	Status   int
	Body     []byte
	ObjectID string // the created object's id; 3010 reports it as details.original_id
}

// Store keeps records in the idempotency_keys table.
type Store struct {
	pool      *pgxpool.Pool
	retention time.Duration
	wait      time.Duration
}

// Options configure a Store.
type Options struct {
	Retention time.Duration // how long a record answers repeats (default 24 h, the spec's)
	// Wait bounds how long a duplicate waits for the first request to finish before it
	// answers 3015 (default 1 s). Short operations thus replay instead of failing.
	Wait time.Duration
}

// New returns a store on pool.
func New(pool *pgxpool.Pool, o Options) *Store {
	if o.Retention <= 0 {
		o.Retention = 24 * time.Hour
	}
	if o.Wait <= 0 {
		o.Wait = time.Second
	}
	return &Store{pool: pool, retention: o.Retention, wait: o.Wait}
}

// Hash fingerprints a request; two requests with the same key are "the same" when their
// hashes are equal. Callers hash what identifies the operation: method, path and raw body
// for the header; the order fields for client_order_id.
func Hash(parts ...[]byte) []byte {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		for i, l := 0, uint64(len(p)); i < 8; i++ {
			n[i] = byte(l >> (8 * i))
		}
		h.Write(n[:]) // length prefix: ("ab","c") and ("a","bc") differ
		h.Write(p)
	}
	return h.Sum(nil)
}

// Claim is the outcome of ClaimTx.
type Claim struct {
	// Fresh is true when this transaction owns the key: do the work, then CompleteTx.
	Fresh bool
	// Replay is the stored response when the same request already completed.
	Replay *Response
}

// ClaimTx claims k for a request with hash inside tx. It returns Fresh when the work must
// be done, Replay when it was already done, 3010 when the key was used for a different
// request and 3015 when the first request is still running after Wait. It changes tx's
// lock_timeout only for its own statements.
func (s *Store) ClaimTx(ctx context.Context, tx pgx.Tx, k Key, hash []byte) (Claim, error) {
	if _, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = %d`, s.wait.Milliseconds())); err != nil {
		return Claim{}, err
	}
	c, err := s.claim(ctx, tx, k, hash)
	if err != nil {
		return c, err
	}
	if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = DEFAULT`); err != nil {
		return Claim{}, err
	}
	return c, nil
}

// BeginQuery is a BEGIN that also bounds the transaction's lock waits by Wait, in the same
// round trip (pgx.TxOptions.BeginQuery). A transaction begun with it claims with
// ClaimBegunTx, which spares ClaimTx's two SET statements; the bound then stays until the
// caller sets its own (order creation sets its lock wait right after the claim).
func (s *Store) BeginQuery() string {
	return fmt.Sprintf("BEGIN; SET LOCAL lock_timeout = %d", s.wait.Milliseconds())
}

// ClaimBegunTx is ClaimTx inside a transaction begun with BeginQuery.
func (s *Store) ClaimBegunTx(ctx context.Context, tx pgx.Tx, k Key, hash []byte) (Claim, error) {
	return s.claim(ctx, tx, k, hash)
}

// claimSQL claims a key in one statement: a new record, or an expired one replaced by the
// new operation (the conflict update applies only past the retention). A live record
// changes nothing (no row affected) and is read by stored.
const claimSQL = `INSERT INTO idempotency_keys (account_id, namespace, key, request_hash, state)
		VALUES ($1, $2, $3, $4, 'in_progress')
		ON CONFLICT (account_id, namespace, key) DO UPDATE SET request_hash = EXCLUDED.request_hash, state = 'in_progress',
			response_status = NULL, response_body = NULL, object_id = NULL, created_at = now()
		WHERE idempotency_keys.created_at < now() - make_interval(secs => $5)`

// claim is ClaimTx under a lock_timeout the caller has set.
func (s *Store) claim(ctx context.Context, tx pgx.Tx, k Key, hash []byte) (Claim, error) {
	tag, err := tx.Exec(ctx, claimSQL, k.AccountID, k.Namespace, k.Key, hash, s.retention.Seconds())
	return s.claimed(ctx, tx, k, hash, tag.RowsAffected() == 1, err)
}

// claimed interprets the claim statement's outcome: fresh when it wrote the record,
// otherwise the stored record decides (replay, 3010 or 3015).
func (s *Store) claimed(ctx context.Context, tx pgx.Tx, k Key, hash []byte, fresh bool, err error) (Claim, error) {
	if err == nil && fresh {
		return Claim{Fresh: true}, nil
	}
	if err != nil {
		if isLockTimeout(err) {
			return Claim{}, s.inProgress()
		}
		return Claim{}, err
	}
	var (
		storedHash []byte
		state      string
		status     *int
		body       []byte
		objectID   *string
	)
	err = tx.QueryRow(ctx, `SELECT request_hash, state, response_status, response_body, object_id
		FROM idempotency_keys WHERE account_id = $1 AND namespace = $2 AND key = $3`,
		k.AccountID, k.Namespace, k.Key).Scan(&storedHash, &state, &status, &body, &objectID)
	if err != nil {
		return Claim{}, err
	}
	oid := ""
	if objectID != nil {
		oid = *objectID
	}
	if string(storedHash) != string(hash) {
		return Claim{}, apierr.IdempotencyConflict.New("this idempotency key was used for a different request").
			With("original_id", oid)
	}
	if state != "done" || status == nil {
		return Claim{}, s.inProgress()
	}
	return Claim{Replay: &Response{Status: *status, Body: body, ObjectID: oid}}, nil
}

// QueuedClaim is a claim sent in a pgx.Batch together with other statements (one round
// trip for all of them), in a transaction begun with BeginQuery. Result interprets it.
type QueuedClaim struct {
	s     *Store
	k     Key
	hash  []byte
	fresh bool
}

// QueueClaim queues the claim of k in b. Statements queued after it run only if it
// succeeds; their results are meaningful only when Result says Fresh.
func (s *Store) QueueClaim(b *pgx.Batch, k Key, hash []byte) *QueuedClaim {
	q := &QueuedClaim{s: s, k: k, hash: hash}
	b.Queue(claimSQL, k.AccountID, k.Namespace, k.Key, hash, s.retention.Seconds()).Exec(func(tag pgconn.CommandTag) error {
		q.fresh = tag.RowsAffected() == 1
		return nil
	})
	return q
}

// Result is ClaimBegunTx's answer for a queued claim; batchErr is the error of the batch
// that carried it (a lock timeout on the claim is 3015, as in ClaimTx).
func (q *QueuedClaim) Result(ctx context.Context, tx pgx.Tx, batchErr error) (Claim, error) {
	return q.s.claimed(ctx, tx, q.k, q.hash, q.fresh, batchErr)
}

func (s *Store) inProgress() error {
	return apierr.RequestInProgress.New("a request with this idempotency key is still running; look the object up instead of retrying the create").
		WithRetryAfter(max(int(s.wait/time.Second), 1))
}

// CompleteTx stores the response of the work done under a Fresh claim, in the same tx.
func (s *Store) CompleteTx(ctx context.Context, tx pgx.Tx, k Key, r Response) error {
	var oid *string
	if r.ObjectID != "" {
		oid = &r.ObjectID
	}
	tag, err := tx.Exec(ctx, completeSQL, k.AccountID, k.Namespace, k.Key, r.Status, r.Body, oid)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("idempotency: complete %s/%s: not claimed in this transaction", k.Namespace, k.Key)
	}
	return nil
}

// QueueComplete is CompleteTx queued in a pgx.Batch: the batch's error reports a claim
// not made in this transaction.
func (s *Store) QueueComplete(b *pgx.Batch, k Key, r Response) {
	var oid *string
	if r.ObjectID != "" {
		oid = &r.ObjectID
	}
	b.Queue(completeSQL, k.AccountID, k.Namespace, k.Key, r.Status, r.Body, oid).Exec(func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("idempotency: complete %s/%s: not claimed in this transaction", k.Namespace, k.Key)
		}
		return nil
	})
}

const completeSQL = `UPDATE idempotency_keys SET state = 'done', response_status = $4, response_body = $5, object_id = $6
		WHERE account_id = $1 AND namespace = $2 AND key = $3 AND state = 'in_progress'`

// Do runs fn once for k: in one transaction it claims the key, runs fn with that
// transaction and stores fn's response. A repeat gets the stored response with replayed
// true; fn's error rolls everything back (no record stays). fn must do all its database
// work through tx.
func (s *Store) Do(ctx context.Context, k Key, hash []byte, fn func(ctx context.Context, tx pgx.Tx) (Response, error)) (resp Response, replayed bool, err error) {
	err = s.InTx(ctx, func(tx pgx.Tx) error {
		c, err := s.ClaimTx(ctx, tx, k, hash)
		if err != nil {
			return err
		}
		if c.Replay != nil {
			resp, replayed = *c.Replay, true
			return nil
		}
		resp, err = fn(ctx, tx)
		if err != nil {
			return err
		}
		return s.CompleteTx(ctx, tx, k, resp)
	})
	return resp, replayed, err
}

// InTx runs fn in a transaction of the store's pool (for requests without a key, so that
// handlers have one code path).
func (s *Store) InTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// Prune deletes records past the retention; run it periodically (any replica).
func (s *Store) Prune(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM idempotency_keys WHERE created_at < now() - make_interval(secs => $1)`, s.retention.Seconds())
	return tag.RowsAffected(), err
}

func isLockTimeout(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55P03" // lock_not_available
}

// ValidKey reports whether v is a well-formed Idempotency-Key: 8 to 128 characters of
// A-Z a-z 0-9 . _ : -
func ValidKey(v []byte) bool {
	if len(v) < 8 || len(v) > 128 {
		return false
	}
	for _, c := range v {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}
