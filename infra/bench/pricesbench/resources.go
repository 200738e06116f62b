package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"rental/edge"
	"rental/infra/chainread"
	"rental/infra/orderstore"
	"rental/infra/redisx"
	"rental/infra/tron"
	"rental/infra/tronsim"
	"rental/schemas/network"
)

// noOrders answers our_active_orders for the benchmark's anonymous calls (never asked).
type noOrders struct{}

func (noOrders) ActiveOnReceiver(context.Context, string, string, time.Time) ([]orderstore.ActiveOrder, error) {
	return nil, nil
}

// resourcesModule serves GET /v1/resources/{address} as the edge stage wires it: chainread
// with its Redis cache (REDIS_URL, a key prefix of this process) over the TRON node
// simulator on a loopback port. It returns an activated address holding USDT and stake.
func resourcesModule(ctx context.Context) (edge.Module, string, error) {
	addr, err := tron.GenerateKey()
	if err != nil {
		return nil, "", err
	}
	sim, err := tronsim.New(tronsim.Options{Network: network.Nile, Genesis: []tronsim.GenesisAccount{
		{Address: addr.Address(), BalanceSun: 50_000_000, StakeEnergySun: 1_000_000_000, USDT: 5_000_000}}})
	if err != nil {
		return nil, "", err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	node := &http.Server{Handler: sim.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = node.Serve(ln) }()
	go func() { <-ctx.Done(); _ = node.Close(); _ = sim.Close() }()

	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	rdb, err := redisx.Connect(ctx, url)
	if err != nil {
		return nil, "", err
	}
	go func() { <-ctx.Done(); _ = rdb.Close() }()
	reader, err := chainread.New(chainread.Options{
		Node: tron.NewClient("http://" + ln.Addr().String()), Network: network.Nile, USDT: sim.USDTContract(),
		Redis: rdb, RedisPrefix: fmt.Sprintf("bench:%d:", os.Getpid()),
	})
	if err != nil {
		return nil, "", err
	}
	mod, err := edge.NewResources(edge.ResourcesOptions{Chain: reader, Orders: noOrders{}})
	if err != nil {
		return nil, "", err
	}
	return mod, addr.Address().String(), nil
}
