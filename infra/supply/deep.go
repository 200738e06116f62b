package supply

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"

	"rental/infra/tron"
	"rental/processors/pricing"
)

// DeepReserve reads an on-chain energy rental contract with the ABI
//
//	availableEnergy() returns (uint256)
//	rentalPrice(uint256 amount, uint256 seconds) returns (uint256 totalSun)
//
// through triggerconstantcontract (no transaction, no fee). The simulator deploys one at
// tronsim.DeepReserveContract(). Deep supply is energy only.
type DeepReserve struct {
	node     Node
	contract tron.Address
	caller   tron.Address
	// RefAmount is the amount the per-unit cost is derived from: cost = ceil(rentalPrice(
	// RefAmount, seconds) × 100 / RefAmount) centisun, so a price that is not linear in the
	// amount is sampled at a typical order size.
	RefAmount int64
}

// NewDeepReserve reads contract, calling from caller (any activated address; the platform's
// first pool address in practice).
func NewDeepReserve(node Node, contract, caller tron.Address) *DeepReserve {
	return &DeepReserve{node: node, contract: contract, caller: caller, RefAmount: 1_000_000}
}

var (
	selAvailableEnergy = tron.Keccak256([]byte("availableEnergy()"))[:4]
	selRentalPrice     = tron.Keccak256([]byte("rentalPrice(uint256,uint256)"))[:4]
)

// Offers are the deep offers for the given tiers: the same available energy at each tier's
// price. A pool with no energy gives no offers.
func (d *DeepReserve) Offers(ctx context.Context, tiers []pricing.Tier) ([]pricing.Offer, error) {
	avail, err := d.call(ctx, selAvailableEnergy)
	if err != nil {
		return nil, fmt.Errorf("supply: deep availableEnergy: %w", err)
	}
	if avail.Sign() <= 0 {
		return nil, nil
	}
	amount := avail.Int64()
	if !avail.IsInt64() {
		amount = 1<<62 - 1
	}
	var out []pricing.Offer
	for _, t := range tiers {
		data := append([]byte{}, selRentalPrice...)
		data = append(data, word(d.RefAmount)...)
		data = append(data, word(pricing.TierSeconds(t))...)
		total, err := d.call(ctx, data)
		if err != nil {
			return nil, fmt.Errorf("supply: deep rentalPrice %s: %w", t, err)
		}
		// cost per unit in centisun, rounded up: the platform never books supply below
		// what it pays.
		c := new(big.Int).Mul(total, big.NewInt(pricing.CentisunPerSun))
		c.Add(c, big.NewInt(d.RefAmount-1))
		c.Quo(c, big.NewInt(d.RefAmount))
		if !c.IsInt64() || c.Sign() <= 0 {
			return nil, fmt.Errorf("supply: deep rentalPrice %s: unusable price %s", t, total)
		}
		out = append(out, pricing.Offer{Class: pricing.ClassDeep, Source: "deep:" + d.contract.String(),
			Resource: pricing.Energy, Tier: t, Cost: pricing.Centisun(c.Int64()), Amount: amount})
	}
	return out, nil
}

func (d *DeepReserve) call(ctx context.Context, data []byte) (*big.Int, error) {
	ext, err := d.node.TriggerConstantContract(ctx, &tron.TriggerSmartContract{
		OwnerAddress: d.caller, ContractAddress: d.contract, Data: data,
	})
	if err != nil {
		return nil, err
	}
	if !ext.Result.Result || len(ext.ConstantResult) == 0 {
		msg, _ := hex.DecodeString(ext.Result.Message)
		return nil, fmt.Errorf("call refused: %s %s", ext.Result.Code, msg)
	}
	out, err := hex.DecodeString(ext.ConstantResult[0])
	if err != nil || len(out) != 32 {
		return nil, errors.New("call returned no uint256")
	}
	return new(big.Int).SetBytes(out), nil
}

func word(v int64) []byte {
	b := make([]byte, 32)
	big.NewInt(v).FillBytes(b)
	return b
}
