package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// fault is one injected fault: start is when it began, end when what it broke was back
// (the same instant for a fault with no outage: a flush, armed node faults, a fork).
type fault struct {
	kind       string
	start, end time.Time
	detail     string
}

// inject runs one fault of kind and returns once the broken part is back.
func (e *env) inject(ctx context.Context, kind string, n int) (fault, error) {
	f := fault{kind: kind, start: time.Now()}
	var err error
	switch kind {
	case "sigkill":
		err = e.killStack(ctx)
	case "pg_restart":
		e.pg.signal(syscall.SIGINT, 30*time.Second)
		err = e.restartPG(ctx)
	case "pg_stop":
		e.pg.signal(syscall.SIGQUIT, 30*time.Second)
		sleep(ctx, e.st.outage)
		err = e.restartPG(ctx)
	case "redis_flush":
		c := redis.NewClient(&redis.Options{Addr: e.redisAt})
		err = c.FlushAll(ctx).Err()
		c.Close()
	case "redis_restart":
		e.redis.signal(syscall.SIGKILL, 5*time.Second)
		err = e.restartRedis(ctx)
	case "redis_stop":
		e.redis.signal(syscall.SIGKILL, 5*time.Second)
		sleep(ctx, e.st.outage)
		err = e.restartRedis(ctx)
	case "node_down":
		// Armed for far more calls than the outage can see, then disarmed: a node down for
		// CHAOS_OUTAGE.
		if err = e.simCallRetry(ctx, 30*time.Second, "/sim/faults", map[string]any{"kind": "node_down", "count": 1 << 40}, nil); err == nil {
			sleep(ctx, e.st.outage)
			err = e.simCallRetry(ctx, 30*time.Second, "/sim/faults", map[string]any{"kind": "node_down", "count": 0}, nil)
		}
	case "reject":
		err = e.simCallRetry(ctx, 30*time.Second, "/sim/faults", map[string]any{"kind": "reject_delegation", "count": 5}, nil)
		f.detail = "next 5 delegation broadcasts refused"
	case "drop":
		err = e.simCallRetry(ctx, 30*time.Second, "/sim/faults", map[string]any{"kind": "drop_tx", "count": 5}, nil)
		f.detail = "next 5 broadcasts accepted and lost"
	case "fork":
		depth := e.st.confirmations + 4
		if n%2 == 1 {
			depth = 2*e.st.confirmations + 8
		}
		var res struct {
			ReIncluded []string `json:"re_included"`
		}
		err = e.simCallRetry(ctx, 30*time.Second, "/sim/fork", map[string]any{"depth": depth}, &res)
		f.detail = fmt.Sprintf("depth %d (confirmations %d), %d transactions moved", depth, e.st.confirmations, len(res.ReIncluded))
	default:
		err = fmt.Errorf("unknown fault %q", kind)
	}
	f.end = time.Now()
	return f, err
}

func (e *env) restartPG(ctx context.Context) error {
	if err := e.pg.start(); err != nil {
		return err
	}
	return waitPostgres(ctx, e.pg.url("postgres"), 60*time.Second)
}

func (e *env) restartRedis(ctx context.Context) error {
	if err := e.redis.start(); err != nil {
		return err
	}
	return waitRedis(ctx, e.redisAt, 10*time.Second)
}

// disarmSim clears whatever node faults are still armed, so that the settling phase sees
// a healthy node.
func (e *env) disarmSim(ctx context.Context) error {
	for _, k := range []string{"node_down", "reject_delegation", "drop_tx"} {
		if err := e.simCallRetry(ctx, 60*time.Second, "/sim/faults", map[string]any{"kind": k, "count": 0}, nil); err != nil {
			return err
		}
	}
	return nil
}

// estimate is roughly how long a fault of kind keeps the soak busy, for spacing them.
func (e *env) estimate(kind string) time.Duration {
	switch kind {
	case "pg_stop", "redis_stop", "node_down":
		return e.st.outage + time.Second
	case "sigkill":
		return 8 * time.Second
	case "pg_restart", "redis_restart":
		return 2 * time.Second
	}
	return 0
}

// schedule injects the faults in turn from after a warm-up until end, spaced so that every
// kind runs at least once when the load is long enough (2 minutes for all ten), and at
// most 15 s apart, so that a long run goes through them again and again.
func (e *env) schedule(ctx context.Context, end time.Time) ([]fault, error) {
	warmup := 10 * time.Second
	var busy time.Duration
	for _, k := range e.st.faults {
		busy += e.estimate(k)
	}
	gap := (time.Until(end) - warmup - 5*time.Second - busy) / time.Duration(len(e.st.faults))
	gap = min(max(gap, 3*time.Second), 15*time.Second)
	if !sleep(ctx, warmup) {
		return nil, ctx.Err()
	}
	var out []fault
	for i := 0; ; i++ {
		kind := e.st.faults[i%len(e.st.faults)]
		if time.Now().Add(e.estimate(kind)).After(end.Add(-2 * time.Second)) {
			return out, nil
		}
		f, err := e.inject(ctx, kind, i/len(e.st.faults))
		if err != nil {
			return out, fmt.Errorf("fault %s: %w", kind, err)
		}
		out = append(out, f)
		e.log.Info("fault", "kind", kind, "outage", f.end.Sub(f.start).Round(time.Millisecond), "detail", f.detail)
		if !sleep(ctx, gap) {
			return out, ctx.Err()
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// faultReport is what clients saw around the faults of one kind.
type faultReport struct {
	kind     string
	count    int
	outage   time.Duration  // longest time the broken part was down (start to end)
	failing  time.Duration  // longest span from the first to the last failed order answer in a fault's window
	firstOK  time.Duration  // longest time from a fault's end to the next 201/200
	answers  map[string]int // failed order answers in the faults' windows, by status and code
	delivery time.Duration  // longest creation-to-delegation time of orders created in the windows
}

// report groups the attempts by fault window: from a fault's start to the next fault's start
// (the last one: to loadEnd plus a minute).
func report(faults []fault, atts []attempt, delivered func(from, to time.Time) time.Duration, loadEnd time.Time) []faultReport {
	sort.Slice(atts, func(i, j int) bool { return atts[i].at.Before(atts[j].at) })
	by := map[string]*faultReport{}
	var order []string
	for i, f := range faults {
		until := loadEnd.Add(time.Minute)
		if i+1 < len(faults) {
			until = faults[i+1].start
		}
		r := by[f.kind]
		if r == nil {
			r = &faultReport{kind: f.kind, answers: map[string]int{}}
			by[f.kind] = r
			order = append(order, f.kind)
		}
		r.count++
		r.outage = max(r.outage, f.end.Sub(f.start))
		var firstBad, lastBad time.Time
		for _, a := range atts {
			if a.at.Before(f.start) || !a.at.Before(until) {
				continue
			}
			if a.status >= 200 && a.status < 300 {
				continue
			}
			if firstBad.IsZero() {
				firstBad = a.at
			}
			lastBad = a.at
			r.answers[answerKey(a)]++
		}
		for _, a := range atts {
			if !a.at.Before(f.end) && a.status >= 200 && a.status < 300 {
				r.firstOK = max(r.firstOK, a.at.Sub(f.end))
				break
			}
		}
		if !firstBad.IsZero() {
			r.failing = max(r.failing, lastBad.Sub(firstBad))
		}
		r.delivery = max(r.delivery, delivered(f.start, until))
	}
	out := make([]faultReport, 0, len(order))
	for _, k := range order {
		out = append(out, *by[k])
	}
	return out
}

func answerKey(a attempt) string {
	if a.status == 0 {
		return "no answer"
	}
	if a.code == 0 {
		return fmt.Sprint(a.status)
	}
	if a.reason != "" {
		return fmt.Sprintf("%d %d %s", a.status, a.code, a.reason)
	}
	return fmt.Sprintf("%d %d", a.status, a.code)
}

func (r faultReport) String() string {
	keys := make([]string, 0, len(r.answers))
	for k := range r.answers {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return r.answers[keys[i]] > r.answers[keys[j]] })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s x%d", k, r.answers[k]))
	}
	seen := "no failed answer"
	if len(parts) > 0 {
		seen = strings.Join(parts, ", ")
	}
	rd := func(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }
	return fmt.Sprintf("fault %-13s x%d: down up to %s; clients saw %s (failing for up to %s); first accepted order %s after the end; delivery up to %s",
		r.kind, r.count, rd(r.outage), seen, rd(r.failing), rd(r.firstOK), rd(r.delivery))
}
