package edge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/valyala/fasthttp"

	"rental/infra/ratelimit"
	"rental/schemas/apierr"
	"rental/schemas/events"
)

// RateLimits are the budgets the edge charges (docs/auth.md, "Limits").
type RateLimits struct {
	// Per credential (API key, session, bootstrap token), requests in any rolling second,
	// by the endpoint's RateClass. Defaults: the spec's 30 order, 50 read, 5 management.
	Order, Read, Management int
	// IP is the per-IP budget (per ClientSource: an IPv4 address or an IPv6 network)
	// charged for every request, anonymous or not, before
	// authentication (so a flood of bad signatures is cut off cheaply). Default 100 per
	// second with a burst of 100: above one key's order and read budgets together, so one
	// integrator behind one address is limited by its key first.
	IP redis_rate.Limit
	// Quota is the per-account daily and monthly request quota (1102); off by default.
	Quota ratelimit.Quota
}

func (r *RateLimits) defaults() {
	if r.Order <= 0 {
		r.Order = 30
	}
	if r.Read <= 0 {
		r.Read = 50
	}
	if r.Management <= 0 {
		r.Management = 5
	}
	if r.IP.IsZero() {
		r.IP = redis_rate.Limit{Rate: 100, Burst: 100, Period: time.Second}
	}
}

func (r RateLimits) perSecond(c RateClass) int {
	switch c {
	case ClassOrder:
		return r.Order
	case ClassRead:
		return r.Read
	case ClassManagement:
		return r.Management
	}
	return 0
}

// Rate-limit response headers (draft-ietf-httpapi-ratelimit-headers, the spec's names).
const (
	HeaderRateLimit     = "RateLimit-Limit"
	HeaderRateRemaining = "RateLimit-Remaining"
	HeaderRateReset     = "RateLimit-Reset"
)

const rateKey = "edge.rate"

// setRateHeaders records d as the budget shown to the client when it is the tighter of
// the budgets charged so far (fewer requests remaining), and writes the headers.
func setRateHeaders(rc *fasthttp.RequestCtx, d ratelimit.Decision) {
	if prev, ok := rc.UserValue(rateKey).(ratelimit.Decision); ok && prev.Remaining < d.Remaining {
		d = prev
	}
	rc.SetUserValue(rateKey, d)
	writeRateHeaders(rc)
}

// writeRateHeaders (re)writes the recorded headers, for instance after a panic reset the
// response.
func writeRateHeaders(rc *fasthttp.RequestCtx) {
	d, ok := rc.UserValue(rateKey).(ratelimit.Decision)
	if !ok {
		return
	}
	h := &rc.Response.Header
	h.Set(HeaderRateLimit, strconv.Itoa(d.Limit))
	h.Set(HeaderRateRemaining, strconv.Itoa(d.Remaining))
	h.Set(HeaderRateReset, strconv.Itoa(ratelimit.Seconds(d.Reset)))
}

// fallback answers a budget when Redis does not: the replica's own in-memory budget of
// the same size (ratelimit.Local) decides instead. Budgets are fairness, not security, and
// Redis holds only what may be lost; refusing all traffic because Redis is down would
// turn a cache outage into an API outage, and letting everything through would turn it
// into a flood. Redis' state changes are logged once each (depstate).
func (s *Server) fallback(rc *fasthttp.RequestCtx, key string, perSecond float64, burst int, err error) ratelimit.Decision {
	s.redisState.Observe(err)
	s.limiterErrors.Inc()
	d := s.local.Allow(key, perSecond, burst)
	setRateHeaders(rc, d)
	return d
}

// chargeIP charges the per-IP budget; it runs in the middleware for every request.
func (s *Server) chargeIP(ctx context.Context, rc *fasthttp.RequestCtx) error {
	if s.opts.Limiter == nil {
		return nil
	}
	lim := s.opts.RateLimits.IP
	key := "ip:" + ClientSource(rc) // an IPv6 network, not each of its addresses
	d, err := s.opts.Limiter.GCRA(ctx, key, lim)
	if err != nil {
		d = s.fallback(rc, key, float64(lim.Rate)/lim.Period.Seconds(), lim.Burst, err)
	} else {
		s.redisState.Observe(nil)
		setRateHeaders(rc, d)
	}
	if !d.Allowed {
		return rateLimited(d, "per-IP budget exceeded")
	}
	return nil
}

// chargeCredential makes a signed request's replay check (1009 first, and then nothing is
// charged), charges the caller's budget for the endpoint's class, then the account's
// quotas. The replay check and the budget share one Redis round trip. Anonymous calls pay
// only the per-IP budget.
func (s *Server) chargeCredential(ctx context.Context, rc *fasthttp.RequestCtx, e Endpoint, p *Principal) error {
	n, id := s.opts.RateLimits.perSecond(e.Class), rateIdentity(p)
	if s.opts.Limiter == nil || n <= 0 || id == "" {
		if p.replay != nil {
			if err := p.replay.check(ctx); err != nil {
				return err
			}
		}
	} else {
		var (
			d   ratelimit.Decision
			err error
		)
		if r := p.replay; r != nil {
			once, ttl := r.cache.Entry(r.keyID, r.sum)
			var first bool
			d, first, err = s.opts.Limiter.WindowOnce(ctx, string(e.Class)+":"+id, n, time.Second, once, ttl)
			if rerr := r.outcome(first, err); rerr != nil {
				return rerr
			}
		} else {
			d, err = s.opts.Limiter.Window(ctx, string(e.Class)+":"+id, n, time.Second)
		}
		if err != nil {
			d = s.fallback(rc, string(e.Class)+":"+id, float64(n), n, err)
		} else {
			s.redisState.Observe(nil)
			setRateHeaders(rc, d)
		}
		if !d.Allowed {
			return rateLimited(d, "per-"+p.Via.String()+" "+string(e.Class)+" budget exceeded")
		}
	}
	if s.opts.Limiter == nil {
		return nil
	}
	if q := s.opts.RateLimits.Quota; q.On() && p.AccountID != "" {
		qd, err := s.opts.Limiter.ChargeQuota(ctx, p.AccountID, q, time.Now())
		if err != nil {
			// Quotas fail open: a per-replica count of a day would be meaningless.
			s.redisState.Observe(err)
			s.limiterErrors.Inc()
			return nil
		}
		if !qd.Allowed {
			retry := ratelimit.Seconds(time.Until(qd.ResetsAt))
			return apierr.QuotaExceeded.Newf("%s quota of %d requests reached", qd.Window, qd.Limit).
				With("resets_at", events.FormatTime(qd.ResetsAt)).With("window", qd.Window).
				With("limit", qd.Limit).WithRetryAfter(retry)
		}
	}
	return nil
}

// rateIdentity names the credential's budget. Session ids are secrets, so only a hash of
// them reaches Redis.
func rateIdentity(p *Principal) string {
	switch p.Via {
	case CredKey:
		return "k:" + p.KeyID
	case CredSession:
		h := sha256.Sum256([]byte(p.SessionID))
		return "s:" + hex.EncodeToString(h[:12])
	case CredBootstrap:
		if p.AccountID != "" {
			return "b:" + p.AccountID
		}
		return "b:" + p.Wallet
	}
	return ""
}

func rateLimited(d ratelimit.Decision, msg string) *apierr.Error {
	return apierr.RateLimited.New(msg).WithRetryAfter(max(ratelimit.Seconds(d.RetryAfter), 1))
}
