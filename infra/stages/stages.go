// Package stages is what every stage binary shares: Main (configuration, the Postgres pool,
// the metrics listener, signal handling), Runner, the Kafka producer that creates the topic
// catalogue, and Together. Each stage is wired from configuration in its own package below
// this one (edgestage, relaystage, chainstage, pricerstage, orderflowstage, batchstage,
// substage, creditstage, webhookstage; acceptstage and ledgerstage are the wiring those
// share), so a binary links only what its stage needs: the relay, chainwatch, crediting and
// webhook binaries link no HTTP edge. The stage binaries and the all-in-one dev stack build
// stages through the same functions, so a stage is configured the same way wherever it
// runs. These packages are the only ones besides the binaries that know config.Config; the
// stages themselves take plain options.
package stages

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"rental/infra/config"
	"rental/infra/kafka"
	"rental/schemas/topics"
)

// Runner is a stage ready to run until its context ends.
type Runner interface {
	Run(ctx context.Context) error
}

// RunnerFunc adapts a function to Runner.
type RunnerFunc func(ctx context.Context) error

func (f RunnerFunc) Run(ctx context.Context) error { return f(ctx) }

// KafkaProducer connects to cfg.KafkaBrokers and creates every catalogue topic that is
// missing. The caller closes the client.
func KafkaProducer(ctx context.Context, cfg config.Config) (*kgo.Client, error) {
	sec, err := KafkaOpts(cfg)
	if err != nil {
		return nil, err
	}
	cl, err := kafka.NewClient(cfg.KafkaBrokers, sec...)
	if err != nil {
		return nil, err
	}
	// Brokers that answer but refuse the client (credentials, TLS) stop the stage at once
	// with a message naming the variables; brokers that do not answer are waited for.
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = KafkaSecurity(cfg).CheckAuth(actx, cl)
	cancel()
	if err != nil {
		cl.Close()
		return nil, err
	}
	// Kafka down at start: wait for it (WaitFor) rather than exit.
	_, err = WaitFor(ctx, slog.Default(), "kafka", func(ctx context.Context) (struct{}, error) {
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := kafka.EnsureTopics(tctx, kadm.NewClient(cl), topics.All()); err != nil {
			return struct{}{}, fmt.Errorf("%w (KAFKA_BROKERS=%v)", err, cfg.KafkaBrokers)
		}
		return struct{}{}, nil
	})
	if err != nil {
		cl.Close()
		return nil, err
	}
	return cl, nil
}

// together runs several runners until the first fails or ctx ends; the edge uses it to
// keep its in-memory caches fed for as long as it serves.
type together []Runner

func (t together) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, r := range t {
		g.Go(func() error { return r.Run(gctx) })
	}
	return g.Wait()
}

// Together runs the non-nil runners as one (see together).
func Together(rs ...Runner) Runner {
	var t together
	for _, r := range rs {
		if r != nil {
			t = append(t, r)
		}
	}
	return t
}
