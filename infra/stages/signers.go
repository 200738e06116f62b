package stages

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"rental/infra/config"
	"rental/infra/custody"
	"rental/infra/tron"
	"rental/schemas/network"
)

// Signers are a signing stage's pool signers (infra/custody), checked once on chain: on
// mainnet a signer key that can do more than delegate and reclaim stops the stage here.
// onChange (may be nil) hears every change of the pools' states.
func Signers(ctx context.Context, cfg config.Config, node custody.Node, stage string, pools []tron.Address, keys []tron.PrivateKey,
	log *slog.Logger, reg prometheus.Registerer, onChange func(context.Context, map[tron.Address]string)) (*custody.Signers, error) {
	s, err := custody.New(custody.Options{Node: node, Pools: pools, Keys: keys, Strict: cfg.Network == network.Mainnet,
		Stage: stage, Logger: log, Registerer: reg, OnChange: onChange})
	if err != nil {
		return nil, err
	}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}
