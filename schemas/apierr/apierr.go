// Package apierr is the API error catalogue of rental-api-v1: every code, its slug, its
// HTTP status and whether an identical retry may succeed later (the spec's definition of
// error.retryable: the same request, signed afresh, may succeed once time passes or the
// cause outside the request is fixed; a retry that needs a new nonce, token, quote or
// client_order_id is a new request, so those codes are not retryable, docs/errors.md
// "Retryable"). It is the one table every stage uses; codes are never renumbered or reused. Modelled on franz-go's kerr: each code is a
// comparable value, and errors.Is matches an *Error against its code.
package apierr

import (
	"errors"
	"fmt"
)

// Code is one row of the catalogue.
type Code struct {
	Code      int
	Slug      string
	Status    int // HTTP status the edge answers with
	Retryable bool
	Desc      string // the spec's condition, a default message
}

func (c *Code) Error() string { return fmt.Sprintf("%d %s", c.Code, c.Slug) }

// Error is one occurrence of a catalogue code, with the context the envelope carries.
type Error struct {
	Code    *Code
	Message string         // English, for logs only
	Field   string         // offending request field, "" for none
	Details map[string]any // machine-readable context named by the spec
	// RetryAfter, when > 0, is sent as the Retry-After header (seconds).
	RetryAfter int
	cause      error
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = e.Code.Desc
	}
	if e.Field != "" {
		return fmt.Sprintf("%d %s (%s): %s", e.Code.Code, e.Code.Slug, e.Field, msg)
	}
	return fmt.Sprintf("%d %s: %s", e.Code.Code, e.Code.Slug, msg)
}

// Is lets errors.Is(err, apierr.InvalidAddress) match an occurrence of that code.
func (e *Error) Is(target error) bool {
	c, ok := target.(*Code)
	return ok && c == e.Code
}

func (e *Error) Unwrap() error { return e.cause }

// New makes an occurrence of c with a message.
func (c *Code) New(msg string) *Error { return &Error{Code: c, Message: msg} }

// Newf is New with formatting.
func (c *Code) Newf(format string, args ...any) *Error {
	return &Error{Code: c, Message: fmt.Sprintf(format, args...)}
}

// Wrap makes an occurrence of c caused by err (kept for errors.Unwrap, not shown to clients).
func (c *Code) Wrap(err error, msg string) *Error { return &Error{Code: c, Message: msg, cause: err} }

// WithField returns e naming the offending field.
func (e *Error) WithField(field string) *Error { e.Field = field; return e }

// With adds one details key.
func (e *Error) With(key string, value any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details[key] = value
	return e
}

// WithRetryAfter sets the Retry-After seconds.
func (e *Error) WithRetryAfter(seconds int) *Error { e.RetryAfter = seconds; return e }

// As extracts the catalogue error from err; any other error becomes 9000 internal_error
// so that nothing unknown leaks to a client.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var c *Code
	if errors.As(err, &c) {
		return &Error{Code: c}
	}
	return &Error{Code: InternalError, cause: err}
}

// ByCode finds a catalogue row; ok is false for an unknown code.
func ByCode(code int) (*Code, bool) {
	c, ok := byCode[code]
	return c, ok
}

// All returns the catalogue in code order.
func All() []*Code { return append([]*Code(nil), all...) }

var (
	all    []*Code
	byCode = map[int]*Code{}
)

func def(code int, slug string, status int, retryable bool, desc string) *Code {
	c := &Code{Code: code, Slug: slug, Status: status, Retryable: retryable, Desc: desc}
	if _, dup := byCode[code]; dup {
		panic(fmt.Sprintf("apierr: code %d defined twice", code))
	}
	byCode[code] = c
	all = append(all, c)
	return c
}

// 1000-1099 authentication.
var (
	MissingCredentials     = def(1001, "missing_credentials", 401, false, "A required auth header is absent.")
	InvalidSignature       = def(1002, "invalid_signature", 401, false, "Signature differs from the server's computation.")
	SignatureTimestampSkew = def(1003, "signature_timestamp_skew", 401, true, "Clock off by more than 5 s.")
	IPNotAllowed           = def(1004, "ip_not_allowed", 401, false, "Source IP not in the key's allowlist.")
	InsufficientScope      = def(1005, "insufficient_scope", 403, false, "Key lacks the needed scope.")
	KeyRevoked             = def(1006, "key_revoked", 401, false, "Key deleted or expired.")
	KeyInactive            = def(1007, "key_inactive", 401, false, "Key exists but is inactive.")
	AccountSuspended       = def(1008, "account_suspended", 403, false, "Account frozen; reads only, no orders.")
	ReplayedSignature      = def(1009, "replayed_signature", 401, false, "Signature already used in the window.")
	ChallengeInvalid       = def(1010, "challenge_invalid", 401, false, "Nonce unknown, expired, used, or signature does not recover the address.")
	BootstrapTokenExpired  = def(1011, "bootstrap_token_expired", 401, false, "Bootstrap token expired or used on a forbidden endpoint.")
	KeyEnvironmentMismatch = def(1012, "key_environment_mismatch", 401, false, "Key prefix does not match the host environment.")
	SessionExpired         = def(1013, "session_expired", 401, false, "Session cookie missing, expired or signed out.")
	CSRFTokenInvalid       = def(1014, "csrf_token_invalid", 403, false, "Cookie-authenticated write lacks a valid X-CSRF-Token.")
	// KeyExceedsCaller is ours, not the spec's (docs/errors.md): a key creating or widening
	// a key beyond its own expiry or IP allowlist (scopes beyond its own are 1005).
	KeyExceedsCaller = def(1015, "key_exceeds_caller", 403, false, "A key cannot create or widen a key beyond its own expiry or IP allowlist.")
)

// 1100-1199 rate and quota.
var (
	RateLimited        = def(1100, "rate_limited", 429, true, "Per-key or per-IP budget exceeded.")
	ConcurrencyLimited = def(1101, "concurrency_limited", 429, true, "Too many orders or batches in flight for the account.")
	QuotaExceeded      = def(1102, "quota_exceeded", 429, true, "Daily or monthly quota reached.")
)

// 2000-2099 validation; never retryable.
var (
	MalformedJSON          = def(2000, "malformed_json", 400, false, "Body not valid JSON or Content-Type not application/json.")
	ValidationFailed       = def(2001, "validation_failed", 400, false, "Missing, mistyped or out-of-range parameter.")
	EmptyPatch             = def(2002, "empty_patch", 422, false, "PATCH body has no mutable field.")
	TierUnavailable        = def(2003, "tier_unavailable", 422, false, "Tier not on sale for the resource.")
	QuoteMismatch          = def(2004, "quote_mismatch", 422, false, "quote_id sent together with order parameters contradicting the quote.")
	IdempotencyKeyRequired = def(2005, "idempotency_key_required", 400, false, "Batch create without client_batch_id or Idempotency-Key.")
	DuplicateReceiver      = def(2006, "duplicate_receiver", 400, false, "Same receiver repeated in one batch.")
	InvalidAddress         = def(2007, "invalid_address", 400, false, "Not a valid Base58Check address.")
	AmountOutOfRange       = def(2008, "amount_out_of_range", 400, false, "Amount under the minimum or over the maximum.")
	BatchTooLarge          = def(2009, "batch_too_large", 400, false, "More than 100 receivers or total energy above the batch cap.")
	InvalidWebhookURL      = def(2010, "invalid_webhook_url", 400, false, "URL not HTTPS, private target, embedded credentials, or over 2,048 characters.")
	UnsupportedContract    = def(2011, "unsupported_contract", 422, false, "Contract in a transfer estimate is not a supported TRC-20 token.")
)

// 2050-2059 HTTP transport: answers about the request's framing rather than its fields.
// Not in the spec's catalogue; added under its "new situations get new codes" (docs/errors.md).
var (
	RouteNotFound       = def(2050, "route_not_found", 404, false, "No endpoint has this path.")
	MethodNotAllowed    = def(2051, "method_not_allowed", 405, false, "The path does not take this method; Allow lists those it takes.")
	BodyTooLarge        = def(2052, "body_too_large", 413, false, "Request body larger than the server accepts.")
	UnsupportedEncoding = def(2053, "unsupported_content_encoding", 415, false, "Content-Encoding other than identity.")
	URITooLong          = def(2054, "uri_too_long", 414, false, "Request target longer than the server accepts.")
	HeadersTooLarge     = def(2055, "headers_too_large", 431, false, "Request line and headers larger than the server accepts.")
)

// 3000-3099 business state.
var (
	OrderNotFound            = def(3001, "order_not_found", 404, false, "No such order.")
	OrderNotCancellable      = def(3002, "order_not_cancellable", 409, false, "Batch receiver already picked up; single orders cannot be cancelled.")
	ReceiverIsOurs           = def(3003, "receiver_is_ours", 422, false, "Receiver is an internal platform address.")
	ReceiverNotActivated     = def(3004, "receiver_not_activated", 422, true, "Receiver not activated and activate = false; nothing charged.")
	QuoteExpired             = def(3005, "quote_expired", 409, false, "Quote past expires_at.")
	PriceAboveLimit          = def(3006, "price_above_limit", 409, true, "Live total above max_price_sun; nothing charged.")
	NothingToReclaim         = def(3007, "nothing_to_reclaim", 409, false, "No live delegation exists or it already lapsed.")
	ReclaimUnavailable       = def(3008, "reclaim_unavailable", 409, false, "Order filled by a third-party provider.")
	OrderInTerminalState     = def(3009, "order_in_terminal_state", 409, false, "Change requested on a terminal order.")
	IdempotencyConflict      = def(3010, "idempotency_conflict", 409, false, "Same key with a different body.")
	SubscriptionExists       = def(3011, "subscription_exists", 409, false, "Address already has a subscription for that resource.")
	SubscriptionNotActive    = def(3012, "subscription_not_active", 409, false, "Operation needing an active subscription applied to a cancelled one.")
	WebhookLimitReached      = def(3013, "webhook_limit_reached", 409, false, "Two endpoints already registered.")
	WebhookRoleTaken         = def(3014, "webhook_role_taken", 409, false, "Requested role already held.")
	RequestInProgress        = def(3015, "request_in_progress", 409, false, "Same idempotency key still running.")
	APIKeyLimitReached       = def(3017, "api_key_limit_reached", 409, false, "Maximum active keys reached.")
	DepositRotationLimited   = def(3018, "deposit_rotation_limited", 429, true, "Deposit address rotated too often.")
	AddressBookFull          = def(3019, "address_book_full", 409, false, "Address book holds 100 entries.")
	SubscriptionRuleInvalid  = def(3020, "subscription_rule_invalid", 422, false, "Rule outside plan limits.")
	SubscriptionsUnavailable = def(3021, "subscriptions_unavailable", 409, false, "Subscriptions switched off for creating or changing rules.")
	// ObjectNotFound is not in the spec's table (the spec allows new codes for new
	// situations, docs/errors.md): an unknown or foreign id in a path, for objects other
	// than orders and batches (3001).
	ObjectNotFound = def(3022, "object_not_found", 404, false, "No such object on this account (unknown or another account's, not distinguished).")
	// QuoteUsed is ours too: a quote prices one order (docs/pricing.md "Quotes").
	QuoteUsed = def(3023, "quote_used", 409, false, "Quote already used by an order; a quote prices one order.")
)

// Additions lists the codes this catalogue has beyond the spec's table (docs/errors.md).
var Additions = []*Code{RouteNotFound, MethodNotAllowed, BodyTooLarge, UnsupportedEncoding, URITooLong, HeadersTooLarge, ObjectNotFound, QuoteUsed, KeyExceedsCaller, DeliveryBacklogged, DependencyUnavailable}

// 4000-4099 funds.
var (
	InsufficientFunds    = def(4001, "insufficient_funds", 402, true, "Available balance below order total plus activation.")
	BalanceReserved      = def(4002, "balance_reserved", 402, true, "Balance is sufficient but mostly reserved by in-flight orders.")
	CurrencyNotSupported = def(4003, "currency_not_supported", 422, false, "Currency unsupported for the operation.")
	LedgerConflict       = def(4004, "ledger_conflict", 409, true, "Two concurrent debits collided; nothing charged.")
)

// 5000-5099 supply.
var (
	InsufficientSupply       = def(5001, "insufficient_supply", 503, true, "Neither own pool nor providers can fill at a reasonable cost; nothing charged.")
	DelegationFailed         = def(5002, "delegation_failed", 503, false, "Delegation rejected by the chain or never confirmed; charge reversed.")
	ChainUnavailable         = def(5003, "chain_unavailable", 503, true, "Own chain node not responding.")
	ProviderUnavailable      = def(5004, "provider_unavailable", 503, true, "All external providers refused or timed out and own stock is short; nothing charged.")
	ReceiverCapacityExceeded = def(5005, "receiver_capacity_exceeded", 422, false, "Receiver cannot take more delegations.")
	SupplyPaused             = def(5006, "supply_paused", 503, true, "Sales of the resource or tier paused.")
	CapacityUnavailable      = def(5007, "capacity_unavailable", 503, true, "Own capacity short and spill to providers not allowed; money returned.")
	// DeliveryBacklogged is ours, not the spec's (docs/errors.md "Codes beyond the spec").
	DeliveryBacklogged = def(5050, "delivery_backlogged", 503, true, "Delivery is behind acceptance; nothing stored or charged, retry after Retry-After.")
)

// 9000-9099 internal.
var (
	InternalError  = def(9000, "internal_error", 500, true, "Uncaught failure; the outcome is unknown.")
	Timeout        = def(9001, "timeout", 504, true, "Gateway timeout, outcome unknown.")
	NotImplemented = def(9002, "not_implemented", 501, false, "Operation defined but not implemented on this deployment.")
	// DependencyUnavailable: a store the request needs (Postgres, Redis) refused before
	// anything was written, so nothing happened and the same request may be sent again.
	DependencyUnavailable = def(9003, "dependency_unavailable", 503, true, "A dependency is down; nothing was stored. Retry after Retry-After.")
)
