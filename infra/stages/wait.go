package stages

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"rental/infra/redisx"
)

// Backoff of WaitFor: the first retry after waitFirst, doubling up to waitMax.
const (
	waitFirst = 500 * time.Millisecond
	waitMax   = 10 * time.Second
)

// WaitFor calls connect until it succeeds or ctx ends, waiting with exponential backoff
// between attempts, so a stage started before its dependency (Postgres, Redis, Kafka)
// waits for it instead of exiting. It logs one line when it starts waiting (with the
// error, which names the fix) and one when the dependency answers (with the attempts); a
// stage is not ready while it waits, and starts work when WaitFor returns.
func WaitFor[T any](ctx context.Context, log *slog.Logger, what string, connect func(context.Context) (T, error)) (T, error) {
	delay, start := waitFirst, time.Now()
	for attempt := 1; ; attempt++ {
		v, err := connect(ctx)
		if err == nil {
			if attempt > 1 {
				log.Info(what+" answers; starting", "dependency", what, "attempts", attempt,
					"waited", time.Since(start).Round(time.Millisecond).String())
			}
			return v, nil
		}
		if attempt == 1 {
			log.Warn(what+" unavailable at start; waiting for it", "dependency", what, "err", err)
		}
		select {
		case <-ctx.Done():
			var zero T
			return zero, err
		case <-time.After(delay):
		}
		delay = min(2*delay, waitMax)
	}
}

// Redis connects to REDIS_URL, waiting for it (WaitFor); the client is closed when the
// process ends.
func (p *Process) Redis() (*redis.Client, error) {
	rdb, err := WaitFor(p.Ctx, p.Log, "redis", func(ctx context.Context) (*redis.Client, error) {
		return redisx.Connect(ctx, p.Cfg.RedisURL)
	})
	if err != nil {
		return nil, err
	}
	p.Defer(func() { rdb.Close() })
	return rdb, nil
}
