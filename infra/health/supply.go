package health

import "context"

// SupplySource reports the energy that can be sold now for a 1 h rental. An error means
// the source could not be asked (supply is then reported down). The edge uses the pricer's
// order book (infra/stages/edgestage); supply.Pool is the own-stake view.
type SupplySource interface {
	AvailableEnergy(ctx context.Context) (int64, error)
}

// noSupply is the default when no source is configured.
type noSupply struct{}

func (noSupply) AvailableEnergy(context.Context) (int64, error) { return 0, nil }
