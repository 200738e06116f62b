package stages

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/infra/config"
	"rental/infra/health"
	"rental/infra/kafka"
	"rental/infra/metrics"
	"rental/infra/tron"
)

// Needs is what a stage needs besides its Postgres pool to do its work; its readiness
// checks each. The edge's readiness is its own dependencies only: it never looks at how
// fresh chainwatch is (GET /v1/status does), so a stale follower never pulls every edge
// replica out of the load balancer at once.
type Needs struct{ Redis, Kafka, Node bool }

// StageNeeds are the readiness dependencies of each stage binary, by its Main name.
var StageNeeds = map[string]Needs{
	"edge":          {Redis: true},
	"relay":         {Kafka: true},
	"chainwatch":    {Node: true},
	"orderflow":     {Kafka: true, Node: true},
	"batches":       {Redis: true, Kafka: true},
	"subscriptions": {Redis: true, Node: true},
	"crediting":     {Kafka: true, Node: true},
	"webhooks":      {Kafka: true},
	"pricer":        {Redis: true, Kafka: true, Node: true},
	"payments":      {Redis: true, Node: true},
}

// NewLogger is the logger of a stage binary: JSON lines on w unless format is "text", at
// level (debug, info, warn, error; default info). Config.Load has validated both.
func NewLogger(w io.Writer, format, level string) *slog.Logger {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil || level == "" {
		lv = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: lv}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// KafkaOpts are the client options every Kafka client of a stage adds: TLS and SASL from
// KAFKA_TLS* and KAFKA_SASL_*.
func KafkaOpts(cfg config.Config) ([]kgo.Opt, error) {
	return KafkaSecurity(cfg).Opts()
}

// KafkaSecurity converts the configuration to infra/kafka's Security.
func KafkaSecurity(cfg config.Config) kafka.Security {
	k := cfg.Kafka
	return kafka.Security{TLS: k.TLS, CAFile: k.CAFile, CertFile: k.CertFile, KeyFile: k.KeyFile,
		SASLMechanism: k.SASLMechanism, SASLUsername: k.SASLUsername, SASLPassword: k.SASLPassword}
}

// NeedsOf is what the stages named need together: a process that runs several stages (the
// dev stack) is ready when each of them would be.
func NeedsOf(names ...string) Needs {
	var n Needs
	for _, name := range names {
		s := StageNeeds[name]
		n.Redis, n.Kafka, n.Node = n.Redis || s.Redis, n.Kafka || s.Kafka, n.Node || s.Node
	}
	return n
}

// Readiness builds the readiness checks of stage name: its Postgres pool always, and what
// StageNeeds lists, each through a client of its own so a probe never queues behind the
// stage's work. Cleanups are registered on p.
func Readiness(p *Process, name string) (*health.Readiness, error) {
	return ReadinessOf(p, StageNeeds[name])
}

// ReadinessOf builds the readiness checks of a process that needs need besides its
// Postgres pool, as Readiness does for one stage.
func ReadinessOf(p *Process, need Needs) (*health.Readiness, error) {
	r := &health.Readiness{}
	AddPostgres(r, p.Pool)
	if need.Redis {
		opt, err := redis.ParseURL(p.Cfg.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		opt.PoolSize = 1
		rdb := redis.NewClient(opt)
		p.Defer(func() { _ = rdb.Close() })
		r.Add("redis", func(ctx context.Context) error { return rdb.Ping(ctx).Err() })
	}
	if need.Kafka {
		sec, err := KafkaOpts(p.Cfg)
		if err != nil {
			return nil, err
		}
		cl, err := kafka.NewClient(p.Cfg.KafkaBrokers, sec...)
		if err != nil {
			return nil, err
		}
		p.Defer(cl.Close)
		// A refused secret stops the stage at start with a message naming the variables,
		// instead of a consumer retrying it forever.
		actx, cancel := context.WithTimeout(p.Ctx, 15*time.Second)
		defer cancel()
		if err := KafkaSecurity(p.Cfg).CheckAuth(actx, cl); err != nil {
			return nil, err
		}
		r.Add("kafka", cl.Ping)
	}
	if need.Node {
		node := tron.NewClient(p.Cfg.TronNodeURL, tron.WithTimeout(health.CheckTimeout))
		r.Add("node", func(ctx context.Context) error {
			_, err := node.GetHead(ctx)
			return err
		})
	}
	return r, nil
}

// AddPostgres adds the check of a stage's own pool: a round trip through one of its
// connections.
func AddPostgres(r *health.Readiness, pool *pgxpool.Pool) {
	r.Add("postgres", pool.Ping)
}

// OpsRoutes are the probes served next to /metrics: GET /healthz answers 200 while the
// process serves at all (liveness: restart me only when this fails), GET /readyz 200 when
// every readiness check passes and 503 otherwise, with a JSON body naming what is not
// ready and why.
func OpsRoutes(r *health.Readiness) []metrics.Route {
	return []metrics.Route{
		{Pattern: "GET /healthz", Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"status":"alive"}`)
		})},
		{Pattern: "GET /readyz", Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			ctx, cancel := context.WithTimeout(req.Context(), health.CheckTimeout+time.Second)
			defer cancel()
			rep := r.Ready(ctx)
			w.Header().Set("Content-Type", "application/json")
			if rep.Status != "ready" {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			_ = json.NewEncoder(w).Encode(rep)
		})},
	}
}
