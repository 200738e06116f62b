package health

import (
	"context"
	"errors"
	"fmt"

	"rental/infra/tron"
)

// SupplySource reports the energy that can be sold now for a 1 h rental. An error means
// the source could not be asked (supply is then reported down).
type SupplySource interface {
	AvailableEnergy(ctx context.Context) (int64, error)
}

// EnergyNode is the part of the java-tron HTTP API the node supply source uses;
// *tron.Client satisfies it.
type EnergyNode interface {
	GetAccountResource(ctx context.Context, addr tron.Address) (*tron.AccountResource, error)
	GetCanDelegatedMaxSize(ctx context.Context, owner tron.Address, resource tron.ResourceCode) (int64, error)
}

// NodeSupply asks the TRON node how much energy the platform's own stake pools can still
// delegate: for each pool address getcandelegatedmaxsize(ENERGY) in SUN, converted to energy
// with the network's TotalEnergyLimit / TotalEnergyWeight from getaccountresource. It does
// not count third-party providers; it is the "own reserve" view of supply.
type NodeSupply struct {
	node  EnergyNode
	pools []tron.Address
}

// NewNodeSupply returns a source over the given pool addresses. With no pools it reports 0
// (degraded), which is what a deployment without own stake has to sell.
func NewNodeSupply(node EnergyNode, pools []tron.Address) *NodeSupply {
	return &NodeSupply{node: node, pools: pools}
}

// AvailableEnergy sums the pools. Any failed call fails the whole answer: a partial sum would
// understate supply without saying so.
func (s *NodeSupply) AvailableEnergy(ctx context.Context) (int64, error) {
	if len(s.pools) == 0 {
		return 0, nil
	}
	res, err := s.node.GetAccountResource(ctx, s.pools[0])
	if err != nil {
		return 0, fmt.Errorf("supply: getaccountresource: %w", err)
	}
	var total int64
	for _, pool := range s.pools {
		sun, err := s.node.GetCanDelegatedMaxSize(ctx, pool, tron.Energy)
		if err != nil {
			return 0, fmt.Errorf("supply: getcandelegatedmaxsize %s: %w", pool, err)
		}
		e, err := tron.EnergyForBalance(sun, res.TotalEnergyLimit, res.TotalEnergyWeight)
		if errors.Is(err, tron.ErrNoEnergyWeight) {
			return 0, nil // nobody stakes for energy on this network: nothing to sell
		}
		if err != nil {
			return 0, fmt.Errorf("supply: %w", err)
		}
		total += e
	}
	return total, nil
}

// noSupply is the default when no source is configured.
type noSupply struct{}

func (noSupply) AvailableEnergy(context.Context) (int64, error) { return 0, nil }
