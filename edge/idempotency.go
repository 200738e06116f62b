package edge

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"
	"github.com/valyala/fasthttp"

	"rental/infra/idempotency"
	"rental/schemas/apierr"
)

// HeaderIdempotencyKey is the optional key of mutating requests.
const HeaderIdempotencyKey = "Idempotency-Key"

// TxResult is what a transactional handler answers.
type TxResult struct {
	Status int // 200 or 201
	Body   any // marshalled to JSON and sent
	// Replay is what a repeat of the request gets (with HTTP 200); nil means Body. It
	// differs when Body holds something shown only once, such as an API key secret.
	Replay   any
	ObjectID string // id of the created object, reported by 3010 as original_id
}

// TxHandler does an endpoint's work inside one Postgres transaction, which also holds the
// request's idempotency record when it carries an Idempotency-Key. All database work must
// go through tx.
type TxHandler func(ctx context.Context, tx pgx.Tx, rc *fasthttp.RequestCtx) (TxResult, error)

// Idempotent makes a mutating endpoint honour the Idempotency-Key header (rental-api-v1
// "Idempotency"): without the header h runs once in a transaction; with it, the first
// request runs h and stores the response in the same transaction, a repeat with the same
// method, path and body gets the stored response with HTTP 200, a different request with
// the same key gets 3010 (details.original_id), and a repeat while the first still runs
// gets 3015 with Retry-After. A malformed key is 2001 on field Idempotency-Key and nothing
// runs. Keys are per account; the principal must have one.
func (s *Server) Idempotent(h TxHandler) HandlerFunc {
	return func(ctx context.Context, rc *fasthttp.RequestCtx) error {
		store := s.opts.Idempotency
		if store == nil {
			return apierr.NotImplemented.New("idempotency store not configured")
		}
		raw := rc.Request.Header.Peek(HeaderIdempotencyKey)
		if raw == nil {
			var res TxResult
			err := store.InTx(ctx, func(tx pgx.Tx) error {
				var err error
				res, err = h(ctx, tx, rc)
				return err
			})
			if err != nil {
				return err
			}
			return WriteJSON(rc, res.Status, res.Body)
		}
		if !idempotency.ValidKey(raw) {
			return Invalid(HeaderIdempotencyKey, "format",
				"Idempotency-Key must be 8 to 128 characters of A-Z a-z 0-9 . _ : -")
		}
		p := PrincipalFrom(rc)
		if p == nil || p.AccountID == "" {
			return errNoAccount()
		}
		k := idempotency.Key{AccountID: p.AccountID, Namespace: idempotency.NamespaceHeader, Key: string(raw)}
		hash := idempotency.Hash(rc.Method(), rc.Request.RequestURI(), rc.Request.Body())
		var first []byte
		resp, replayed, err := store.Do(ctx, k, hash, func(ctx context.Context, tx pgx.Tx) (idempotency.Response, error) {
			res, err := h(ctx, tx, rc)
			if err != nil {
				return idempotency.Response{}, err
			}
			if first, err = json.Marshal(res.Body); err != nil {
				return idempotency.Response{}, err
			}
			stored := first
			if res.Replay != nil {
				if stored, err = json.Marshal(res.Replay); err != nil {
					return idempotency.Response{}, err
				}
			}
			return idempotency.Response{Status: res.Status, Body: stored, ObjectID: res.ObjectID}, nil
		})
		if err != nil {
			return err
		}
		rc.Response.Header.SetContentType(contentTypeJSON)
		if replayed {
			// The spec: a repeat returns the original result with HTTP 200 instead of 201.
			rc.Response.Header.Set("Idempotent-Replayed", "true")
			rc.SetStatusCode(fasthttp.StatusOK)
			rc.SetBody(resp.Body)
			return nil
		}
		rc.SetStatusCode(resp.Status)
		rc.SetBody(first)
		return nil
	}
}

// errNoAccount answers a credential that has no account yet (a bootstrap token issued
// before POST /v1/accounts) on an endpoint that acts on the account.
func errNoAccount() *apierr.Error {
	return apierr.ValidationFailed.New("the address of this bootstrap token owns no account yet; create it with POST /v1/accounts first").
		With("constraint", "account_required")
}
