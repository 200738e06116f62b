package edge

// Signup by wallet signature (rental-api-v1, Signup part; docs/signup.md):
//
//	POST /v1/accounts/challenge          public: issue a single-use, domain-bound challenge
//	POST /v1/accounts/challenge/verify   public: signed challenge -> bootstrap token abt_...
//	POST /v1/accounts                    bootstrap token, or one-shot with nonce+signature
//	GET  /v1/accounts/deposit-address    bootstrap token
//
// and the Bootstrap Authenticator (Authorization: Bearer abt_...). Which endpoints a
// bootstrap token may call is the endpoint table's business (routes.go), not this file's.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"rental/infra/accounts"
	"rental/infra/deposits"
	"rental/infra/signup"
	"rental/infra/tron"
	"rental/schemas/apierr"
	"rental/schemas/events"
	"rental/schemas/network"
)

// DefaultMinDepositSun is min_deposit_sun when the brand sets none: 1 TRX.
const DefaultMinDepositSun = 1_000_000

// SignupOptions are the signup module's dependencies.
type SignupOptions struct {
	Brand      string          // BRAND; required
	Network    network.Network // required
	Challenges *signup.Service // required
	Limiter    *signup.ChallengeLimiter
	Accounts   *accounts.Store // required
	Deposits   *deposits.Store // required
	// MinDepositSun is the brand's smallest credited transfer (min_deposit_sun); default
	// DefaultMinDepositSun.
	MinDepositSun int64
}

// Signup is the module serving the signup endpoints. It is also the Bootstrap
// Authenticator (Options.Bootstrap).
type Signup struct {
	o SignupOptions
}

// NewSignup checks the options.
func NewSignup(o SignupOptions) (*Signup, error) {
	if o.Brand == "" || o.Challenges == nil || o.Limiter == nil || o.Accounts == nil || o.Deposits == nil {
		return nil, errors.New("edge: signup: Brand, Challenges, Limiter, Accounts and Deposits are required")
	}
	if _, err := network.Parse(string(o.Network)); err != nil {
		return nil, fmt.Errorf("edge: signup: %w", err)
	}
	if o.MinDepositSun <= 0 {
		o.MinDepositSun = DefaultMinDepositSun
	}
	return &Signup{o: o}, nil
}

// Handlers implements Module.
func (m *Signup) Handlers() map[string]HandlerFunc {
	return map[string]HandlerFunc{
		"POST /v1/accounts/challenge":        m.postChallenge,
		"POST /v1/accounts/challenge/verify": m.postVerify,
		"POST /v1/accounts":                  m.postAccounts,
		"GET /v1/accounts/deposit-address":   m.getDepositAddress,
	}
}

// ---- wire shapes ----

type challengeRequest struct {
	Address *string `json:"address"`
	Purpose *string `json:"purpose"`
}

type challengeResponse struct {
	Nonce     string      `json:"nonce"`
	Address   string      `json:"address"`
	Purpose   string      `json:"purpose"`
	Message   string      `json:"message"`
	IssuedAt  events.Time `json:"issued_at"`
	ExpiresAt events.Time `json:"expires_at"`
}

type signedRequest struct {
	Address   *string `json:"address"`
	Nonce     *string `json:"nonce"`
	Signature *string `json:"signature"`
}

type bootstrapResponse struct {
	BootstrapToken string      `json:"bootstrap_token"`
	ExpiresAt      events.Time `json:"expires_at"`
	AccountID      *string     `json:"account_id"`
	AccountStatus  *string     `json:"account_status"`
}

type accountCreateRequest struct {
	Address   *string  `json:"address"`
	Nonce     *string  `json:"nonce"`
	Signature *string  `json:"signature"`
	Email     nullable `json:"email"`
	Label     nullable `json:"label"`
}

type nextStep struct {
	Action  string  `json:"action"`
	Address *string `json:"address"`
	Reason  string  `json:"reason"`
}

type accountCreated struct {
	AccountID        string               `json:"account_id"`
	Brand            string               `json:"brand"`
	Network          network.Network      `json:"network"`
	Status           string               `json:"status"`
	OwnerAddress     string               `json:"owner_address"`
	Email            *string              `json:"email"`
	Label            *string              `json:"label"`
	DepositAddresses []depositAddressJSON `json:"deposit_addresses"`
	Next             nextStep             `json:"next"`
	CreatedAt        events.Time          `json:"created_at"`
}

type signupDepositResponse struct {
	AccountID     string               `json:"account_id"`
	Status        string               `json:"status"`
	Data          []depositAddressJSON `json:"data"`
	MinDepositSun int64                `json:"min_deposit_sun"`
}

// depositAddressJSON is the spec's DepositAddress record.
type depositAddressJSON struct {
	Currency              string  `json:"currency"`
	Address               string  `json:"address"`
	Memo                  *string `json:"memo"` // always null
	ConfirmationsRequired int     `json:"confirmations_required"`
	Contract              *string `json:"contract"`
	RateNow               any     `json:"rate_now"` // null until the rate source exists (issue 4)
	SpreadBps             *int    `json:"spread_bps"`
	Min                   *string `json:"min"`
	Max                   *string `json:"max"`
}

// RenderDepositAddresses renders deposit rows as the spec's DepositAddress records.
func RenderDepositAddresses(rows []deposits.DepositAddress) []depositAddressJSON {
	out := make([]depositAddressJSON, 0, len(rows))
	for _, r := range rows {
		out = append(out, depositAddressJSON{
			Currency: string(r.Currency), Address: r.Address.String(), ConfirmationsRequired: r.ConfirmationsRequired,
			Contract: r.Contract, SpreadBps: r.SpreadBps, Min: r.Min, Max: r.Max,
		})
	}
	return out
}

// nullable is a JSON field that distinguishes absent (Set false), null (Set, Value nil) and
// a string.
type nullable struct {
	Set   bool
	Value *string
}

func (n *nullable) UnmarshalJSON(b []byte) error {
	n.Set = true
	if string(b) == "null" {
		n.Value = nil
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	n.Value = &s
	return nil
}

// ---- validation helpers ----

// requiredAddress parses a required address field: 2001 when absent, 2007 when malformed.
func requiredAddress(field string, v *string) (tron.Address, error) {
	if v == nil || *v == "" {
		return tron.Address{}, Invalid(field, "required", field+" is required")
	}
	a, err := tron.ParseAddress(*v)
	if err != nil {
		return tron.Address{}, apierr.InvalidAddress.New(field + " is not a valid TRON address: " + err.Error()).WithField(field)
	}
	return a, nil
}

func requiredString(field string, v *string) (string, error) {
	if v == nil || *v == "" {
		return "", Invalid(field, "required", field+" is required")
	}
	return *v, nil
}

var emailRE = regexp.MustCompile(`^[^\s@]+@[^\s@]+\.[^\s@.]+$`)

// checkEmail is the basic format check of AccountCreateRequest.email (it is not verified).
func checkEmail(v *string) error {
	if v == nil {
		return nil
	}
	if len(*v) > 254 || !emailRE.MatchString(*v) {
		return Invalid("email", "format", "email must look like name@example.com (at most 254 characters)")
	}
	return nil
}

// MaxLabelRunes bounds an account label.
const MaxLabelRunes = 64

// CheckLabel validates a non-null label: 1 to 64 characters, valid UTF-8, no control
// characters, not only spaces. null (nil) is valid and means "no label".
func CheckLabel(v *string) error {
	if v == nil {
		return nil
	}
	s := *v
	if !utf8.ValidString(s) || strings.TrimSpace(s) == "" || utf8.RuneCountInString(s) > MaxLabelRunes ||
		strings.ContainsFunc(s, unicode.IsControl) {
		return Invalid("label", "format", fmt.Sprintf("label must be 1 to %d printable characters, or null to clear it", MaxLabelRunes))
	}
	return nil
}

// challengeError maps the signup package's errors: every failed redemption is the single
// 1010 with one message, so a client (or attacker) learns nothing about which check failed.
func challengeError(err error) error {
	if errors.Is(err, signup.ErrChallengeInvalid) {
		return apierr.ChallengeInvalid.New("the challenge is unknown, expired, already used, or the signature does not recover the address; request a new challenge")
	}
	return err
}

// ---- handlers ----

// postChallenge: POST /v1/accounts/challenge. It never reads accounts, so it answers the
// same for an address with or without one. Bad input is refused before the rate budget is
// charged, so it changes nothing.
func (m *Signup) postChallenge(ctx context.Context, rc *fasthttp.RequestCtx) error {
	var req challengeRequest
	if err := DecodeJSON(rc, &req); err != nil {
		return err
	}
	addr, err := requiredAddress("address", req.Address)
	if err != nil {
		return err
	}
	purpose := signup.PurposeSignup
	if req.Purpose != nil {
		p, ok := signup.ParsePurpose(*req.Purpose)
		if !ok {
			return Invalid("purpose", "enum", "purpose must be one of signup, login, recovery").
				With("allowed", []string{"signup", "login", "recovery"})
		}
		purpose = p
	}
	retry, err := m.o.Limiter.Allow(ctx, ClientSource(rc), addr.String())
	if err != nil {
		return err
	}
	if retry > 0 {
		return apierr.RateLimited.New("too many challenges for this address or from this IP").WithRetryAfter(retry)
	}
	c, err := m.o.Challenges.Issue(ctx, addr, purpose)
	if err != nil {
		return err
	}
	rc.Response.Header.Set("Cache-Control", "no-store")
	return WriteJSON(rc, fasthttp.StatusCreated, challengeResponse{
		Nonce: c.Nonce, Address: c.Address.String(), Purpose: string(c.Purpose), Message: c.Message,
		IssuedAt: events.Time(c.IssuedAt), ExpiresAt: events.Time(c.ExpiresAt),
	})
}

// decodeSigned reads {address, nonce, signature}, all required.
func decodeSigned(rc *fasthttp.RequestCtx) (tron.Address, string, string, error) {
	var req signedRequest
	if err := DecodeJSON(rc, &req); err != nil {
		return tron.Address{}, "", "", err
	}
	addr, err := requiredAddress("address", req.Address)
	if err != nil {
		return tron.Address{}, "", "", err
	}
	nonce, err := requiredString("nonce", req.Nonce)
	if err != nil {
		return tron.Address{}, "", "", err
	}
	sig, err := requiredString("signature", req.Signature)
	if err != nil {
		return tron.Address{}, "", "", err
	}
	return addr, nonce, sig, nil
}

// postVerify: POST /v1/accounts/challenge/verify. Accepts challenges of purpose signup and
// recovery (a login challenge is for POST /v1/session only).
func (m *Signup) postVerify(ctx context.Context, rc *fasthttp.RequestCtx) error {
	addr, nonce, sig, err := decodeSigned(rc)
	if err != nil {
		return err
	}
	if _, err := m.o.Challenges.Redeem(ctx, addr, nonce, sig, signup.PurposeSignup, signup.PurposeRecovery); err != nil {
		return challengeError(err)
	}
	acct, found, err := accountByOwner(ctx, m.o.Accounts, m.o.Network, addr)
	if err != nil {
		return err
	}
	var accountID, status *string
	if found {
		accountID, status = &acct.ID, &acct.Status
	}
	t, err := m.o.Challenges.IssueToken(ctx, addr, acct.ID)
	if err != nil {
		return err
	}
	rc.Response.Header.Set("Cache-Control", "no-store")
	return WriteJSON(rc, fasthttp.StatusOK, bootstrapResponse{
		BootstrapToken: t.Secret, ExpiresAt: events.Time(t.ExpiresAt), AccountID: accountID, AccountStatus: status,
	})
}

// postAccounts: POST /v1/accounts. With a bootstrap token the body's address must be the
// token's (2001 on address otherwise) and nonce/signature must be absent; without one,
// nonce and signature of a signup challenge are required (one-shot create). 201 when the
// account is new, 200 with the same shape when the address already owns one (then email
// and label of the request are ignored: nothing is created or changed).
func (m *Signup) postAccounts(ctx context.Context, rc *fasthttp.RequestCtx) error {
	var req accountCreateRequest
	if err := DecodeJSON(rc, &req); err != nil {
		return err
	}
	addr, err := requiredAddress("address", req.Address)
	if err != nil {
		return err
	}
	if err := checkEmail(req.Email.Value); err != nil {
		return err
	}
	if err := CheckLabel(req.Label.Value); err != nil {
		return err
	}
	p := PrincipalFrom(rc)
	var token *signup.Token
	if p != nil && p.Via == CredBootstrap {
		t, _ := rc.UserValue(bootstrapTokenKey).(*signup.Token)
		if t == nil {
			return errors.New("edge: bootstrap principal without its token")
		}
		if t.Address != addr {
			return Invalid("address", "bootstrap_address", "address must be the address the bootstrap token was issued for")
		}
		if req.Nonce != nil || req.Signature != nil {
			field := "nonce"
			if req.Nonce == nil {
				field = "signature"
			}
			return Invalid(field, "not_allowed", "nonce and signature are for the one-shot create without a bootstrap token")
		}
		token = t
	} else {
		nonce, err := requiredString("nonce", req.Nonce)
		if err != nil {
			return err
		}
		sig, err := requiredString("signature", req.Signature)
		if err != nil {
			return err
		}
		if _, err := m.o.Challenges.Redeem(ctx, addr, nonce, sig, signup.PurposeSignup); err != nil {
			return challengeError(err)
		}
	}

	acct, created, err := m.o.Accounts.CreateOrGetByOwner(ctx, m.o.Network, addr, req.Email.Value, req.Label.Value)
	if err != nil {
		return err
	}
	if created {
		actor := "wallet:" + addr.String() // one-shot: the signed challenge is the credential
		if token != nil {
			actor = "bootstrap:" + addr.String()
		}
		if err := m.o.Accounts.WriteAudit(ctx, acct.ID, actor, "account.create", nil); err != nil {
			return err
		}
	}
	if token != nil && token.AccountID == "" {
		if err := m.o.Challenges.BindToken(ctx, token.Hash, acct.ID); err != nil {
			return err
		}
	}
	rows, err := m.o.Deposits.List(ctx, acct.ID, "")
	if err != nil {
		return err
	}
	status := fasthttp.StatusOK
	if created {
		status = fasthttp.StatusCreated
	}
	return WriteJSON(rc, status, accountCreated{
		AccountID: acct.ID, Brand: m.o.Brand, Network: m.o.Network, Status: acct.Status,
		OwnerAddress: acct.Owner.String(), Email: acct.Email, Label: acct.Label,
		DepositAddresses: RenderDepositAddresses(rows), Next: nextFor(acct.Status, rows),
		CreatedAt: events.Time(acct.CreatedAt),
	})
}

// nextFor is the machine-readable next step of AccountCreated (docs/signup.md).
func nextFor(status string, rows []deposits.DepositAddress) nextStep {
	switch status {
	case StatusUnfunded:
		var addr *string
		if len(rows) > 0 {
			a := rows[0].Address.String()
			addr = &a
		}
		return nextStep{Action: "deposit", Address: addr, Reason: "account is unfunded"}
	case StatusSuspended, StatusClosed:
		return nextStep{Action: "contact_support", Reason: "account is " + status}
	}
	return nextStep{Action: "create_api_key", Reason: "account is active; create an API key with POST /v1/api-keys"}
}

// getDepositAddress: GET /v1/accounts/deposit-address (bootstrap token).
func (m *Signup) getDepositAddress(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p := PrincipalFrom(rc)
	if p == nil {
		return apierr.MissingCredentials.New("this endpoint needs Authorization: Bearer abt_... (a bootstrap token)")
	}
	var only deposits.Currency
	args := rc.QueryArgs()
	if args.Has("currency") {
		c, ok := deposits.ParseCurrency(string(args.Peek("currency")))
		if !ok {
			return Invalid("currency", "enum", "currency must be TRX or USDT").With("allowed", []string{"TRX", "USDT"})
		}
		only = c
	}
	if p.AccountID == "" {
		return apierr.BootstrapTokenExpired.New("the token's address owns no account yet; create it with POST /v1/accounts first")
	}
	acct, err := m.o.Accounts.GetAccount(ctx, p.AccountID)
	if err != nil {
		return err
	}
	rows, err := m.o.Deposits.List(ctx, acct.ID, only)
	if err != nil {
		return err
	}
	return WriteJSON(rc, fasthttp.StatusOK, signupDepositResponse{
		AccountID: acct.ID, Status: acct.Status, Data: RenderDepositAddresses(rows), MinDepositSun: m.o.MinDepositSun,
	})
}

// ---- Bootstrap Authenticator ----

const bootstrapTokenKey = "edge.bootstrap_token"

// BootstrapAuth is the Authenticator of `Authorization: Bearer abt_...` (Options.Bootstrap).
type BootstrapAuth struct{ m *Signup }

// Bootstrap returns the module's Authenticator.
func (m *Signup) Bootstrap() *BootstrapAuth { return &BootstrapAuth{m: m} }

// Authenticate implements Authenticator. An Authorization header that is not a Bearer
// abt_ token is not this authenticator's credential ((nil, nil)); an abt_ token that is
// unknown or expired is 1011. A token issued before its address owned an account picks up
// the account once one exists (created by POST /v1/accounts or a dashboard sign-in).
func (a *BootstrapAuth) Authenticate(ctx context.Context, rc *fasthttp.RequestCtx) (*Principal, error) {
	h := string(rc.Request.Header.Peek(fasthttp.HeaderAuthorization))
	scheme, secret, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || !strings.HasPrefix(strings.TrimSpace(secret), signup.TokenPrefix) {
		return nil, nil
	}
	t, err := a.m.o.Challenges.LookupToken(ctx, strings.TrimSpace(secret))
	if errors.Is(err, signup.ErrTokenInvalid) {
		return nil, apierr.BootstrapTokenExpired.New("the bootstrap token is unknown or expired; sign a new challenge")
	}
	if err != nil {
		return nil, err
	}
	p := &Principal{Wallet: t.Address.String(), AccountID: t.AccountID}
	if t.AccountID == "" {
		acct, found, err := accountByOwner(ctx, a.m.o.Accounts, a.m.o.Network, t.Address)
		if err != nil {
			return nil, err
		}
		if found {
			if err := a.m.o.Challenges.BindToken(ctx, t.Hash, acct.ID); err != nil {
				return nil, err
			}
			t.AccountID, p.AccountID, p.AccountStatus = acct.ID, acct.ID, acct.Status
		}
	} else {
		acct, err := a.m.o.Accounts.GetAccount(ctx, t.AccountID)
		if err != nil {
			return nil, err
		}
		p.AccountStatus = acct.Status
	}
	rc.SetUserValue(bootstrapTokenKey, &t)
	return p, nil
}

// ---- accounts ----

// accountByOwner finds the account owner owns on the module's network.
func accountByOwner(ctx context.Context, st *accounts.Store, net network.Network, owner tron.Address) (accounts.Account, bool, error) {
	a, err := st.GetAccountByOwner(ctx, net, owner)
	if errors.Is(err, accounts.ErrNotFound) {
		return accounts.Account{}, false, nil
	}
	return a, err == nil, err
}

// DepositAddressRefs adapts the deposit store to the Account record's deposit_addresses
// (Options.Account.Deposits). It lists the current address without issuing one, because
// GET /v1/account is a read; signup issues the address in POST /v1/accounts.
type DepositAddressRefs struct{ Store *deposits.Store }

// DepositAddresses implements DepositAddressLister.
func (d DepositAddressRefs) DepositAddresses(ctx context.Context, accountID string) ([]DepositAddressRef, error) {
	rows, err := d.Store.Existing(ctx, accountID)
	if err != nil {
		return nil, err
	}
	out := make([]DepositAddressRef, 0, len(rows))
	for _, r := range rows {
		out = append(out, DepositAddressRef{Currency: string(r.Currency), Address: r.Address.String()})
	}
	return out, nil
}
