// Package supply reads what the platform can sell: its own stake pool inventory from the chain
// (order book class instant), offers of external providers through a provider adapter
// (class market) and the on-chain deep reserve rental contract (class deep). It also holds the
// simulated provider HTTP API used by the dev stack and tests. The pricer stage combines them
// with a Collector into a pricing.Supply each cycle.
package supply

import (
	"context"
	"errors"
	"fmt"

	"rental/infra/tron"
	"rental/schemas/pricing"
)

// Node is the part of the java-tron HTTP API the pool and the deep reserve read;
// *tron.Client satisfies it.
type Node interface {
	GetAccountResource(ctx context.Context, addr tron.Address) (*tron.AccountResource, error)
	GetCanDelegatedMaxSize(ctx context.Context, owner tron.Address, resource tron.ResourceCode) (int64, error)
	TriggerConstantContract(ctx context.Context, t *tron.TriggerSmartContract) (*tron.TransactionExtention, error)
}

// Pool is the platform's own stake pools. Its inventory is, per pool address,
// getcandelegatedmaxsize (SUN that can still be delegated) converted to units with the
// network totals of getaccountresource: energy = TRX × TotalEnergyLimit / TotalEnergyWeight,
// bandwidth = TRX × TotalNetLimit / TotalNetWeight, rounded down.
type Pool struct {
	node  Node
	pools []tron.Address
}

// NewPool returns the pool over the given addresses; with none its inventory is zero.
func NewPool(node Node, pools []tron.Address) *Pool { return &Pool{node: node, pools: pools} }

// Inventory is what the pools can delegate now. Any failed call fails the whole answer: a
// partial sum would understate supply without saying so. A network where nobody stakes for a
// resource yields 0 for it.
func (p *Pool) Inventory(ctx context.Context) (map[pricing.Resource]int64, error) {
	f, err := p.Figures(ctx)
	if err != nil {
		return nil, err
	}
	return f.Units(), nil
}

// PoolFigures is one reading of the pools: per resource, each pool's delegatable balance
// (SUN, getcandelegatedmaxsize) and the network totals that convert SUN to units.
type PoolFigures map[pricing.Resource]ResourceFigures

// ResourceFigures is one resource's part of PoolFigures. Limit and Weight are zero when
// nobody stakes for the resource (nothing to sell).
type ResourceFigures struct {
	Sun           map[string]int64 // by pool address (Base58)
	Limit, Weight int64
}

// Units converts the figures to units (rounded down per pool), summed per resource.
func (f PoolFigures) Units() map[pricing.Resource]int64 {
	out := map[pricing.Resource]int64{pricing.Energy: 0, pricing.Bandwidth: 0}
	for res, r := range f {
		for _, sun := range r.Sun {
			units, err := tron.EnergyForBalance(sun, r.Limit, r.Weight) // the same formula for both resources
			if err == nil {
				out[res] += units
			}
		}
	}
	return out
}

// Figures reads what each pool can delegate now. Any failed call fails the whole answer.
func (p *Pool) Figures(ctx context.Context) (PoolFigures, error) {
	out := PoolFigures{pricing.Energy: {Sun: map[string]int64{}}, pricing.Bandwidth: {Sun: map[string]int64{}}}
	if len(p.pools) == 0 {
		return out, nil
	}
	res, err := p.node.GetAccountResource(ctx, p.pools[0])
	if err != nil {
		return nil, fmt.Errorf("supply: getaccountresource: %w", err)
	}
	for _, r := range []struct {
		res           pricing.Resource
		code          tron.ResourceCode
		limit, weight int64
	}{
		{pricing.Energy, tron.Energy, res.TotalEnergyLimit, res.TotalEnergyWeight},
		{pricing.Bandwidth, tron.Bandwidth, res.TotalNetLimit, res.TotalNetWeight},
	} {
		if r.limit <= 0 || r.weight <= 0 {
			continue // nobody stakes for this resource: nothing to sell
		}
		rf := ResourceFigures{Sun: map[string]int64{}, Limit: r.limit, Weight: r.weight}
		for _, pool := range p.pools {
			sun, err := p.node.GetCanDelegatedMaxSize(ctx, pool, r.code)
			if err != nil {
				return nil, fmt.Errorf("supply: getcandelegatedmaxsize %s %s: %w", pool, r.code, err)
			}
			rf.Sun[pool.String()] = sun
		}
		if _, err := tron.EnergyForBalance(1, r.limit, r.weight); err != nil && !errors.Is(err, tron.ErrNoEnergyWeight) {
			return nil, fmt.Errorf("supply: %s: %w", r.res, err)
		}
		out[r.res] = rf
	}
	return out, nil
}

// AvailableEnergy is the energy inventory; it lets a Pool serve as the status endpoint's
// supply source (health.SupplySource) so both read the chain the same way.
func (p *Pool) AvailableEnergy(ctx context.Context) (int64, error) {
	inv, err := p.Inventory(ctx)
	if err != nil {
		return 0, err
	}
	return inv[pricing.Energy], nil
}
