package accounts

import (
	"net/netip"
	"slices"
	"time"

	"rental/schemas/apierr"
	"rental/schemas/events"
)

// A key that creates or changes keys (api_keys.write) acts with at most its own powers
// (docs/auth.md "Keys that manage keys"): a key it creates, and a key it reactivates or
// whose allowlist it widens, must end up within it. Within is that rule.

// Within returns nil when a key of scopes, expiry and allowlist is no wider than the
// caller's key: every scope one the caller holds (else 1005 insufficient_scope with
// details.required_scope), an expiry no later than the caller's (none only when the
// caller has none; else 1015 key_exceeds_caller on expires_at), and an allowlist inside
// the caller's (any address only when the caller allows any; else 1015 on ip_allowlist).
// field names the request field the refusal points at for the expiry and allowlist ("" to
// use expires_at and ip_allowlist).
func Within(caller Key, sc []string, expires *time.Time, allow []netip.Prefix, field string) error {
	for _, s := range sc {
		if !slices.Contains(caller.Scopes, s) {
			return apierr.InsufficientScope.New("a key can only create or widen keys with scopes it holds itself").
				WithField(or(field, "scopes")).With("required_scope", s)
		}
	}
	if caller.ExpiresAt != nil && (expires == nil || expires.After(*caller.ExpiresAt)) {
		return apierr.KeyExceedsCaller.New("a key can only create or widen keys that expire no later than itself, at "+
			events.FormatTime(*caller.ExpiresAt)).WithField(or(field, "expires_at")).
			With("constraint", "expires_at").With("max_expires_at", events.FormatTime(*caller.ExpiresAt))
	}
	if !AllowlistWithin(allow, caller.IPAllowlist) {
		return apierr.KeyExceedsCaller.New("a key can only create or widen keys whose IP allowlist lies inside its own").
			WithField(or(field, "ip_allowlist")).With("constraint", "ip_allowlist").With("allowed", prefixStrings(caller.IPAllowlist))
	}
	return nil
}

// AllowlistWithin reports whether every address allow admits is admitted by outer. An
// empty list admits any address.
func AllowlistWithin(allow, outer []netip.Prefix) bool {
	if len(outer) == 0 {
		return true
	}
	if len(allow) == 0 {
		return false
	}
	for _, p := range allow {
		if !slices.ContainsFunc(outer, func(o netip.Prefix) bool { return prefixInside(p, o) }) {
			return false
		}
	}
	return true
}

// prefixInside reports whether every address of p lies in o.
func prefixInside(p, o netip.Prefix) bool {
	return o.Bits() <= p.Bits() && o.Contains(p.Addr())
}

// widens reports whether after admits more than before: reactivated, or an allowlist not
// inside the old one. Scopes and expiry do not change after creation.
func widens(before, after Key) bool {
	return (after.IsActive && !before.IsActive) || !AllowlistWithin(after.IPAllowlist, before.IPAllowlist)
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
