// Command tronsim runs the TRON node simulator alone: java-tron's /wallet and
// /walletsolidity API subset plus the /sim control API (see package rental/infra/tronsim).
//
// Environment:
//
//	SIM_ADDR            listen address (default 127.0.0.1:8090)
//	NETWORK             mainnet | nile (default mainnet): lock-period cap and other rules
//	SIM_BLOCK_INTERVAL  Go duration between blocks (default 3s); 0 = mine only on /sim/blocks
//	SIM_DATA_FILE       state file; the chain survives restarts (and SIGKILL) when set
//	SIM_FAUCET_KEY      hex private key of the /sim faucet (default: the public dev-only key)
//
// Flags:
//
//	-genesis FILE  JSON array of {address, balance_sun, stake_energy_sun,
//	               stake_bandwidth_sun, usdt} created at block 0 of a new chain
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/schemas/network"
)

func main() {
	genesisFile := flag.String("genesis", "", "JSON file with genesis accounts")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log, *genesisFile); err != nil {
		log.Error("tronsim stopped", "stage", "tronsim", "err", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger, genesisFile string) error {
	opts := tronsim.Options{Logger: log, BlockInterval: 3 * time.Second, DataFile: os.Getenv("SIM_DATA_FILE")}
	addr := envOr("SIM_ADDR", "127.0.0.1:8090")
	net, err := network.Parse(envOr("NETWORK", string(network.Mainnet)))
	if err != nil {
		return err
	}
	opts.Network = net
	if v := os.Getenv("SIM_BLOCK_INTERVAL"); v != "" {
		if v == "0" {
			opts.BlockInterval = 0
		} else if opts.BlockInterval, err = time.ParseDuration(v); err != nil || opts.BlockInterval < 0 {
			return fmt.Errorf("SIM_BLOCK_INTERVAL=%q: want a duration such as 3s, or 0", v)
		}
	}
	if v := os.Getenv("SIM_FAUCET_KEY"); v != "" {
		k, err := tron.ParsePrivateKey(v)
		if err != nil {
			return fmt.Errorf("SIM_FAUCET_KEY: %w", err)
		}
		opts.FaucetKey = &k
	}
	if genesisFile != "" {
		b, err := os.ReadFile(genesisFile)
		if err != nil {
			return fmt.Errorf("genesis: %w", err)
		}
		if err := json.Unmarshal(b, &opts.Genesis); err != nil {
			return fmt.Errorf("genesis %s: want a JSON array of accounts: %w", genesisFile, err)
		}
	}

	sim, err := tronsim.New(opts)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	serveErr := sim.Serve(ctx, addr)
	closeErr := sim.Close()
	if serveErr != nil {
		return serveErr
	}
	if closeErr != nil {
		return closeErr
	}
	log.Info("tronsim shut down", "stage", "tronsim")
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
