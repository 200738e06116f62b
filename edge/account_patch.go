package edge

// PATCH /v1/account (dashboard session, role owner, X-CSRF-Token): change the display name.
// Body {"label": "..."} sets it, {"label": null} clears it (the dashboard then shows the
// shortened owner address, see docs/signup.md). A body that is empty or names no mutable
// field is 2002 empty_patch; any other field is 2001 unknown_field. The answer is the
// Account record exactly as GET /v1/account renders it.

import (
	"bytes"
	"context"
	"errors"

	"github.com/valyala/fasthttp"

	"rental/infra/accounts"
	"rental/schemas/apierr"
)

// AccountPatchOptions are the PATCH /v1/account module's dependencies.
type AccountPatchOptions struct {
	Accounts *accounts.Store // required
	// Sources renders the Account record: pass the same value as Options.Account, and
	// RateLimits the same as Options.RateLimits, so PATCH answers exactly like GET.
	Sources    AccountSources
	RateLimits RateLimits
}

// AccountPatch is the module serving PATCH /v1/account.
type AccountPatch struct {
	accounts *accounts.Store
	sources  AccountSources
}

// NewAccountPatch checks the options and applies the same defaults the server applies to
// Options.Account.
func NewAccountPatch(o AccountPatchOptions) (*AccountPatch, error) {
	if o.Accounts == nil || o.Sources.Brand == "" || o.Sources.Network == "" {
		return nil, errors.New("edge: account patch: Accounts, Sources.Brand and Sources.Network are required")
	}
	o.RateLimits.defaults()
	o.Sources.defaults(Options{Brand: o.Sources.Brand, Network: o.Sources.Network, RateLimits: o.RateLimits})
	return &AccountPatch{accounts: o.Accounts, sources: o.Sources}, nil
}

// Handlers implements Module.
func (m *AccountPatch) Handlers() map[string]HandlerFunc {
	return map[string]HandlerFunc{"PATCH /v1/account": m.patchAccount}
}

type accountPatchRequest struct {
	Label nullable `json:"label"`
}

func (m *AccountPatch) patchAccount(ctx context.Context, rc *fasthttp.RequestCtx) error {
	p := PrincipalFrom(rc)
	if p == nil || p.Via != CredSession || p.AccountID == "" {
		return apierr.SessionExpired.New("this endpoint needs a dashboard session")
	}
	if len(bytes.TrimSpace(rc.Request.Body())) == 0 {
		return apierr.EmptyPatch.New("the body names no mutable field; send {\"label\": \"...\"} or {\"label\": null}")
	}
	var req accountPatchRequest
	if err := DecodeJSON(rc, &req); err != nil {
		return err
	}
	if !req.Label.Set {
		return apierr.EmptyPatch.New("the body names no mutable field; send {\"label\": \"...\"} or {\"label\": null}")
	}
	if err := CheckLabel(req.Label.Value); err != nil {
		return err
	}
	a, err := m.accounts.UpdateLabel(ctx, p.AccountID, req.Label.Value)
	if err != nil {
		return err
	}
	details := map[string]any{"label": req.Label.Value}
	if err := m.accounts.WriteAudit(ctx, a.ID, "session:"+p.Wallet, "account.update", details); err != nil {
		return err
	}
	out, err := m.sources.Render(ctx, a)
	if err != nil {
		return err
	}
	return WriteJSON(rc, fasthttp.StatusOK, out)
}
