// Command pricer runs the pricer stage: every PRICER_INTERVAL it reloads the price model from
// Postgres, reads supply (own pools on TRON_NODE_URL, providers in PROVIDER_URLS, the deep
// reserve DEEP_RESERVE_CONTRACT), and publishes the snapshot to Postgres (the copy readers
// fall back to after a Redis loss), to Redis (REDIS_URL) for the edge and to the compacted
// topic market.data.v1 on KAFKA_BROKERS. Several replicas may run: each publishes a complete
// snapshot and readers keep the newest. Started while Postgres, Redis or Kafka is down, it
// waits for them with backoff (stages.Main) and starts work when they answer.
//
// It is also the operators' tool for the price model (docs/pricing.md):
//
//	pricer show                                  print the model in force (JSON)
//	pricer set-price  <resource> <tier> <sun>    base price at factor 1.00, e.g. 72.50
//	pricer set-limits <resource> <tier> <min> <max>
//	pricer set-volume <resource> <tier> [<min_amount>=<sun> ...]
//	pricer pause|resume   <resource> <tier>      5006 and row hidden / back on sale
//	pricer enable|disable <resource> <tier>      on sale / listed unavailable (2003)
//	pricer set-factor <day-part id> <bps>        10000 = x1.00
//	pricer set-activation <sun> [paused]
//	pricer set-markups <market bps> <deep bps>
//
// Every edit is validated as a whole model before it commits, and is live at the next cycle.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"rental/infra/config"
	"rental/infra/pg"
	"rental/infra/pricestore"
	"rental/infra/stages"
	"rental/infra/stages/pricerstage"
	"rental/schemas/events"
	"rental/schemas/pricing"
)

func main() {
	if len(os.Args) > 1 {
		adminMain(os.Args[1:])
		return
	}
	// The stage: Postgres, Redis and Kafka are each waited for with backoff when down at
	// start (stages.Main, Process.Redis, KafkaProducer), one log line when the wait starts
	// and one when the dependency answers.
	stages.Main("pricer", func(p *stages.Process) (stages.Runner, error) {
		rdb, err := p.Redis()
		if err != nil {
			return nil, err
		}
		producer, err := stages.KafkaProducer(p.Ctx, p.Cfg)
		if err != nil {
			return nil, err
		}
		p.Defer(producer.Close)
		return pricerstage.Pricer(p.Cfg, p.Pool, rdb, producer, p.Log, p.Reg)
	})
}

// adminMain runs one operator command against the price model and exits; it needs
// Postgres only, and fails at once when it is down (an operator is waiting).
func adminMain(args []string) {
	log := stages.NewLogger(os.Stderr, os.Getenv("LOG_FORMAT"), os.Getenv("LOG_LEVEL")).With("stage", "pricer")
	if err := runAdmin(args); err != nil {
		log.Error("pricer failed", "stage", "pricer", "err", err)
		os.Exit(1)
	}
}

func runAdmin(args []string) error {
	cfg, err := config.Load()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	pool, err := pg.Connect(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	return admin(ctx, pricestore.New(pool), cfg, args)
}

func admin(ctx context.Context, store *pricestore.Store, cfg config.Config, args []string) error {
	n := cfg.Network
	need := func(k int) error {
		if len(args) != k+1 {
			return fmt.Errorf("%s: want %d arguments, see the command's doc", args[0], k)
		}
		return nil
	}
	key := func() (pricing.BookKey, error) {
		r, err := pricing.ParseResource(args[1])
		if err != nil {
			return pricing.BookKey{}, err
		}
		t, err := pricing.ParseTier(args[2])
		return pricing.BookKey{Resource: r, Tier: t}, err
	}
	num := func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }
	var m pricing.Model
	var err error
	switch args[0] {
	case "show":
		m, err = store.Load(ctx, n)
	case "set-price", "set-limits", "set-volume", "pause", "resume", "enable", "disable":
		var k pricing.BookKey
		if len(args) < 3 {
			return fmt.Errorf("%s: want <resource> <tier>", args[0])
		}
		if k, err = key(); err != nil {
			return err
		}
		switch args[0] {
		case "set-price":
			if err := need(3); err != nil {
				return err
			}
			price, perr := events.ParseCentisun(args[3])
			if perr != nil {
				return perr
			}
			m, err = store.SetBasePrice(ctx, n, k, price)
		case "set-limits":
			if err := need(4); err != nil {
				return err
			}
			lo, e1 := num(args[3])
			hi, e2 := num(args[4])
			if err := errors.Join(e1, e2); err != nil {
				return err
			}
			m, err = store.SetLimits(ctx, n, k, lo, hi)
		case "set-volume":
			var steps []pricing.VolumeStep
			for _, a := range args[3:] {
				amt, price, ok := strings.Cut(a, "=")
				lo, e1 := num(amt)
				p, e2 := events.ParseCentisun(price)
				if !ok || e1 != nil || e2 != nil {
					return fmt.Errorf("set-volume: %q: want min_amount=price", a)
				}
				steps = append(steps, pricing.VolumeStep{MinAmount: lo, Price: p})
			}
			m, err = store.SetVolumeSteps(ctx, n, k, steps)
		case "pause", "resume":
			m, err = store.SetPaused(ctx, n, k, args[0] == "pause")
		default:
			m, err = store.SetEnabled(ctx, n, k, args[0] == "enable")
		}
	case "set-factor":
		if err := need(2); err != nil {
			return err
		}
		bps, perr := num(args[2])
		if perr != nil {
			return perr
		}
		m, err = store.SetFactor(ctx, n, args[1], bps)
	case "set-activation":
		if len(args) < 2 || len(args) > 3 || (len(args) == 3 && args[2] != "paused") {
			return errors.New("set-activation: want <sun> [paused]")
		}
		sun, perr := num(args[1])
		if perr != nil {
			return perr
		}
		m, err = store.SetActivation(ctx, n, sun, len(args) == 3)
	case "set-markups":
		if err := need(2); err != nil {
			return err
		}
		mk, e1 := num(args[1])
		dp, e2 := num(args[2])
		if err := errors.Join(e1, e2); err != nil {
			return err
		}
		m, err = store.SetMarkups(ctx, n, mk, dp)
	default:
		return fmt.Errorf("unknown command %q (show, set-price, set-limits, set-volume, pause, resume, enable, disable, set-factor, set-activation, set-markups)", args[0])
	}
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(m)
}
