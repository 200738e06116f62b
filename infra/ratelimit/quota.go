package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Quota is a request count on calendar windows (UTC day and UTC month) per subject. A limit
// of 0 switches that window off.
type Quota struct {
	Daily   int64
	Monthly int64
}

// On reports whether any window is switched on.
func (q Quota) On() bool { return q.Daily > 0 || q.Monthly > 0 }

// QuotaDecision is the outcome of charging a quota.
type QuotaDecision struct {
	Allowed  bool
	Window   string    // "daily" or "monthly": the window that refused; "" when allowed
	Limit    int64     // of the refusing window
	ResetsAt time.Time // start of the next window of the refusing kind
}

// quotaScript increments each window counter, setting its expiry on first use, and undoes
// the increments when a window is over its limit (a refused call does not use quota).
var quotaScript = redis.NewScript(`
local over = 0
for i = 1, #KEYS do
  local n = redis.call('INCR', KEYS[i])
  if n == 1 then redis.call('EXPIREAT', KEYS[i], ARGV[2*i]) end
  if n > tonumber(ARGV[2*i-1]) and over == 0 then over = i end
end
if over > 0 then
  for i = 1, #KEYS do redis.call('DECR', KEYS[i]) end
end
return over
`)

// ChargeQuota counts one call of subject against q at time now. Windows are UTC calendar
// days and months.
func (l *Limiter) ChargeQuota(ctx context.Context, subject string, q Quota, now time.Time) (QuotaDecision, error) {
	if !q.On() {
		return QuotaDecision{Allowed: true}, nil
	}
	now = now.UTC()
	dayStart := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	monthStart := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	type window struct {
		name  string
		limit int64
		key   string
		reset time.Time
	}
	var ws []window
	if q.Daily > 0 {
		ws = append(ws, window{"daily", q.Daily, l.prefix + "quota:d:" + subject + ":" + dayStart.Format("20060102"), dayStart.AddDate(0, 0, 1)})
	}
	if q.Monthly > 0 {
		ws = append(ws, window{"monthly", q.Monthly, l.prefix + "quota:m:" + subject + ":" + monthStart.Format("200601"), monthStart.AddDate(0, 1, 0)})
	}
	keys := make([]string, len(ws))
	args := make([]any, 0, 2*len(ws))
	for i, w := range ws {
		keys[i] = w.key
		// Keep the counter an hour past its window so clock differences never reset it early.
		args = append(args, w.limit, w.reset.Add(time.Hour).Unix())
	}
	over, err := quotaScript.Run(ctx, l.rdb, keys, args...).Int()
	if err != nil {
		return QuotaDecision{}, fmt.Errorf("ratelimit: quota %q: %w", subject, err)
	}
	if over == 0 {
		return QuotaDecision{Allowed: true}, nil
	}
	w := ws[over-1]
	return QuotaDecision{Window: w.name, Limit: w.limit, ResetsAt: w.reset}, nil
}
