// Package stages wires each stage from configuration and its live dependencies. The stage
// binaries and the all-in-one dev stack both build stages here, so a stage is configured
// the same way wherever it runs. It is the only package besides the binaries that knows
// config.Config; the stages themselves take plain options.
package stages

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"rental/chainwatch"
	"rental/edge"
	"rental/infra/config"
	"rental/infra/health"
	"rental/infra/kafka"
	"rental/infra/outbox"
	"rental/infra/tron"
	"rental/schemas/topics"
)

// Runner is a stage ready to run until its context ends.
type Runner interface {
	Run(ctx context.Context) error
}

// KafkaProducer connects to cfg.KafkaBrokers and creates every catalogue topic that is
// missing. The caller closes the client.
func KafkaProducer(ctx context.Context, cfg config.Config) (*kgo.Client, error) {
	cl, err := kafka.NewClient(cfg.KafkaBrokers)
	if err != nil {
		return nil, err
	}
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := kafka.EnsureTopics(tctx, kadm.NewClient(cl), topics.All()); err != nil {
		cl.Close()
		return nil, fmt.Errorf("%w (KAFKA_BROKERS=%v)", err, cfg.KafkaBrokers)
	}
	return cl, nil
}

// Relay is the outbox relay publishing through producer.
func Relay(cfg config.Config, pool *pgxpool.Pool, producer *kgo.Client, log *slog.Logger, reg prometheus.Registerer) (Runner, error) {
	return outbox.NewRelay(outbox.RelayOptions{
		Pool:       pool,
		Producer:   producer,
		Logger:     log,
		Registerer: reg,
		SweepEvery: cfg.OutboxSweepEvery,
	})
}

// Chainwatch is the chain follower reading cfg.TronNodeURL and following cfg.USDTContract.
func Chainwatch(cfg config.Config, pool *pgxpool.Pool, log *slog.Logger, reg prometheus.Registerer) (Runner, error) {
	return chainwatch.New(chainwatch.Options{
		Pool:          pool,
		Source:        chainwatch.NewNodeSource(tron.NewClient(cfg.TronNodeURL), 4),
		Outbox:        outbox.InsertRecord,
		Network:       cfg.Network,
		Tokens:        []tron.Address{cfg.USDTContract},
		Confirmations: cfg.Confirmations,
		PollEvery:     cfg.ChainPollEvery,
		Start:         cfg.ChainStartBlock,
		Logger:        log,
		Registerer:    reg,
	})
}

// Edge is the API edge with its status probes.
func Edge(cfg config.Config, pool *pgxpool.Pool, log *slog.Logger, reg prometheus.Registerer) (Runner, error) {
	node := tron.NewClient(cfg.TronNodeURL, tron.WithTimeout(2*time.Second))
	checker := health.NewChecker(health.Options{
		Database: health.NewPostgres(pool),
		Supply:   health.NewNodeSupply(node, cfg.PoolAddresses),
		Logger:   log,
	})
	return edge.New(edge.Options{
		Logger:        log,
		Registerer:    reg,
		Network:       cfg.Network,
		Addr:          cfg.HTTPAddr,
		Status:        checker,
		ShutdownGrace: cfg.ShutdownGrace,
	})
}
